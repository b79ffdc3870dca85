// The approver as a real process (dist/ask-only approver) whose console a test types on, as a
// person would, through a pipe. Output is watched as it arrives: tests wait for the text itself,
// never for a fixed time.
import type { Subprocess } from "bun";
import { BINARY, testEnv } from "./binary.ts";

/** Collects a stream's text and wakes waiters when what they wait for has arrived. */
export class OutputWatch {
  text = "";
  #waiters = new Set<() => void>();
  #ended = false;

  constructor(stream: ReadableStream<Uint8Array>) {
    void this.#pump(stream);
  }

  async #pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    const reader = stream.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      this.text += decoder.decode(value, { stream: true });
      for (const wake of this.#waiters) wake();
    }
    this.#ended = true;
    for (const wake of this.#waiters) wake();
  }

  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Resolves with the match once `pattern` matches the text after `from` (a character offset);
   * rejects after `deadlineMs` (a bound on a broken test, not a wait for the event).
   */
  waitFor(pattern: RegExp, from = 0, deadlineMs = 15_000): Promise<RegExpExecArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const m = pattern.exec(this.text.slice(from));
        if (m) {
          done();
          resolve(m);
        } else if (this.#ended) {
          done();
          reject(new Error(`stream ended without ${pattern}; it said:\n${this.text}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${pattern} within ${deadlineMs} ms; the stream said:\n${this.text}`));
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

export type ApproverFiles = { cert: string; key: string; ca: string };

export type ApproverOptions = {
  files: ApproverFiles;
  db: string;
  ttl?: string;
  maxPending?: number;
  listen?: string;
  extraArgs?: string[];
  env?: Record<string, string>;
};

export type ApproverProcess = {
  proc: Subprocess<"pipe", "pipe", "pipe">;
  port: number;
  url: string;
  out: OutputWatch;
  err: OutputWatch;
  /** Types one line on the console and returns the stdout offset before it, to wait from. */
  type: (line: string) => number;
  /** SIGTERM, then the exit code. */
  stop: () => Promise<number>;
} & AsyncDisposable;

export function approverArgs(o: ApproverOptions): string[] {
  return [
    "approver",
    "--cert",
    o.files.cert,
    "--key",
    o.files.key,
    "--ca",
    o.files.ca,
    "--listen",
    o.listen ?? "127.0.0.1:0",
    "--db",
    o.db,
    ...(o.ttl ? ["--ttl", o.ttl] : []),
    ...(o.maxPending ? ["--max-pending", String(o.maxPending)] : []),
    ...(o.extraArgs ?? []),
  ];
}

/** Starts the approver and resolves once it says where it listens. */
export async function startApprover(o: ApproverOptions): Promise<ApproverProcess> {
  const proc = Bun.spawn([BINARY, ...approverArgs(o)], {
    env: testEnv(o.env),
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = new OutputWatch(proc.stdout);
  const err = new OutputWatch(proc.stderr);
  let m: RegExpExecArray;
  try {
    m = await err.waitFor(/listening on https:\/\/127\.0\.0\.1:(\d+)/);
  } catch (e) {
    proc.kill("SIGKILL");
    throw e;
  }
  const port = Number(m[1]);
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
    return proc.exited;
  };
  return {
    proc,
    port,
    url: `https://localhost:${port}`,
    out,
    err,
    type: (line) => {
      const at = out.text.length;
      proc.stdin.write(`${line}\n`);
      proc.stdin.flush();
      return at;
    },
    stop,
    [Symbol.asyncDispose]: async () => {
      await stop();
    },
  };
}
