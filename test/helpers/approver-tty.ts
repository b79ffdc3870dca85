// The approver on a pseudo-terminal, as a person runs it: the compiled binary under Bun's own
// PTY (`Bun.spawn` with `terminal`), resizable, typed on. Every byte the terminal shows is kept,
// so a test can take the exact bytes of the recap the approver wrote for an ask and compare
// their SHA-256 with the signed decision record. Tests wait for the text itself, never a time.
import { BINARY, testEnv } from "./binary.ts";

/** What the terminal showed, as bytes and as text, waking waiters when what they wait for arrives. */
export class Screen {
  #chunks: Uint8Array[] = [];
  #bytes: Buffer | undefined;
  text = "";
  #waiters = new Set<() => void>();
  #decoder = new TextDecoder();
  #closed = false;

  push(bytes: Uint8Array): void {
    this.#chunks.push(new Uint8Array(bytes));
    this.#bytes = undefined;
    this.text += this.#decoder.decode(bytes, { stream: true });
    for (const wake of this.#waiters) wake();
  }

  close(): void {
    this.#closed = true;
    for (const wake of this.#waiters) wake();
  }

  /** Every byte so far, exactly as the terminal delivered it. */
  get bytes(): Buffer {
    this.#bytes ??= Buffer.concat(this.#chunks);
    return this.#bytes;
  }

  /** The match once `pattern` matches the text after `from`; rejects after `deadlineMs` (a bound on a broken test). */
  waitFor(pattern: RegExp, from = 0, deadlineMs = 20_000): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const m = pattern.exec(this.text.slice(from));
        if (m) {
          done();
          resolve(m);
        } else if (this.#closed) {
          done();
          reject(new Error(`the terminal closed without ${pattern}; it showed:\n${this.text}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${pattern} within ${deadlineMs} ms; the terminal showed:\n${this.text}`));
      }, deadlineMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /**
   * The bytes of the last recap the approver wrote for `id`: from `[ask ID]` through the line end
   * of `  approve ID   or   deny ID`, with the CR the terminal driver puts before each LF (ONLCR)
   * taken out again. The approver writes no CR itself (the recap escapes one as `\u{d}`), which
   * this checks: nothing the approver wrote is dropped.
   */
  lastRecapBytes(id: string): Buffer {
    const all = this.bytes;
    const start = all.lastIndexOf(Buffer.from(`[ask ${id}]`));
    if (start < 0) throw new Error(`no recap of ${id} on the terminal`);
    const endMark = Buffer.from(`  approve ${id}   or   deny ${id}\r\n`);
    const end = all.indexOf(endMark, start);
    if (end < 0) throw new Error(`the recap of ${id} has no last row yet`);
    const raw = all.subarray(start, end + endMark.length);
    const text = raw.toString("latin1");
    if (text.replaceAll("\r\n", "").includes("\r")) throw new Error("a CR that the terminal driver did not add");
    return Buffer.from(text.replaceAll("\r\n", "\n"), "latin1");
  }

  /** The text since `from` (an offset into text), lines without CR. */
  linesSince(from: number): string[] {
    return this.text.slice(from).replaceAll("\r", "").split("\n");
  }
}

export type TtyApprover = {
  proc: ReturnType<typeof Bun.spawn>;
  screen: Screen;
  port: number;
  /** The desk listener's port, when --desk-listen was given. */
  deskPort: number | undefined;
  /** The lines written since `from` (an offset into the text), without CR. */
  linesSince: (from: number) => string[];
  /** Types one line as a person would (Enter ends it) and returns the text offset before it. */
  type: (line: string) => number;
  resize: (columns: number, rows: number) => void;
  /** SIGTERM, then waits for the exit code. */
  stop: () => Promise<number>;
} & AsyncDisposable;

/** Starts `dist/ask-only ARGS` on a terminal of the given size; resolves once it listens. */
export async function startTtyApprover(options: { args: string[]; columns?: number; rows?: number; env?: Record<string, string> }): Promise<TtyApprover> {
  const screen = new Screen();
  const proc = Bun.spawn([BINARY, ...options.args], {
    env: testEnv({ TERM: "xterm-256color", ...options.env }),
    terminal: {
      cols: options.columns ?? 100,
      rows: options.rows ?? 50,
      data: (_term, bytes) => screen.push(bytes),
      exit: () => screen.close(),
    },
  });
  const terminal = proc.terminal!;
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
    const code = await proc.exited;
    terminal.close();
    return code;
  };
  let port: number;
  let deskPort: number | undefined;
  try {
    port = Number((await screen.waitFor(/approver listening on https:\/\/127\.0\.0\.1:(\d+)/))[1]);
    if (options.args.includes("--desk-listen")) deskPort = Number((await screen.waitFor(/listening for the desk on https:\/\/127\.0\.0\.1:(\d+)/))[1]);
    await screen.waitFor(/type "help" for the console commands/);
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    proc,
    screen,
    port,
    deskPort,
    linesSince: (from) => screen.linesSince(from),
    type: (line) => {
      const at = screen.text.length;
      terminal.write(`${line}\r`);
      return at;
    },
    resize: (columns, rows) => terminal.resize(columns, rows),
    stop,
    [Symbol.asyncDispose]: async () => {
      await stop();
    },
  };
}
