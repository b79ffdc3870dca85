// The approver on a real terminal: the compiled binary on a pseudo-terminal of a given size,
// made by Bun itself (`Bun.spawn` with `terminal`), resizable as a person's window is. stdout and
// stderr both reach the terminal, as they would a person's; the test waits for the text itself.
import { BINARY, testEnv } from "./binary.ts";

/** Collects what the terminal shows and wakes waiters when what they wait for has arrived. */
class TerminalText {
  text = "";
  #waiters = new Set<() => void>();
  #decoder = new TextDecoder();

  push(bytes: Uint8Array): void {
    this.text += this.#decoder.decode(bytes, { stream: true });
    for (const wake of this.#waiters) wake();
  }

  /** The match once `pattern` matches the text after `from`; rejects after `deadlineMs` (a bound on a broken test). */
  waitFor(pattern: RegExp, from = 0, deadlineMs = 15_000): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const m = pattern.exec(this.text.slice(from));
        if (m) {
          done();
          resolve(m);
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
}

export type TtyApprover = {
  port: number;
  /** Everything written to the terminal (raw: \r\n line ends, the bell, the echo of typed lines). */
  screen: TerminalText;
  /** The lines written since `from` (a character offset), without \r. */
  linesSince: (from: number) => string[];
  /** Resizes the terminal (the approver gets SIGWINCH). */
  resize: (columns: number, rows: number) => void;
  /** Types one line and returns the offset before it, to wait from. */
  type: (line: string) => number;
} & AsyncDisposable;

export async function startTtyApprover(options: { args: string[]; columns: number; rows: number }): Promise<TtyApprover> {
  const screen = new TerminalText();
  const proc = Bun.spawn([BINARY, ...options.args], {
    env: testEnv({ TERM: "xterm-256color" }),
    terminal: { cols: options.columns, rows: options.rows, data: (_term, bytes) => screen.push(bytes) },
  });
  const terminal = proc.terminal!;
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
    terminal.close();
  };
  let port: number;
  try {
    port = Number((await screen.waitFor(/listening on https:\/\/127\.0\.0\.1:(\d+)/))[1]);
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    port,
    screen,
    linesSince: (from) => screen.text.slice(from).replaceAll("\r", "").split("\n"),
    resize: (columns, rows) => terminal.resize(columns, rows),
    type: (line) => {
      const at = screen.text.length;
      terminal.write(`${line}\r`);
      return at;
    },
    [Symbol.asyncDispose]: stop,
  };
}
