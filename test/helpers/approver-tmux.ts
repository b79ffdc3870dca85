// The approver on a real terminal: a detached tmux session of a given size, on its own tmux
// server (-L, unique per test). The pane's output and the approver's stderr reach the test
// through FIFOs, so the test waits for the text itself.
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { OutputWatch } from "./approver-process.ts";
import { BINARY } from "./binary.ts";

export type TmuxApprover = {
  port: number;
  /** What the approver writes to the terminal (raw, with \r\n and any bell). */
  pane: OutputWatch;
  err: OutputWatch;
  /** The visible screen now. */
  capture: () => string;
  resize: (columns: number, rows: number) => void;
  type: (line: string) => number;
} & AsyncDisposable;

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

export async function startTmuxApprover(options: { dir: string; args: string[]; columns: number; rows: number }): Promise<TmuxApprover> {
  const socket = `ask-only-test-${process.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: options.dir, NO_COLOR: "1", TZ: "Etc/UTC", TERM: "xterm-256color" };
  const tmux = (...args: string[]) => {
    const r = spawnSync("tmux", ["-L", socket, ...args], { env, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`tmux ${args[0]} failed: ${r.stderr}`);
    return r.stdout;
  };
  const paneFifo = join(options.dir, `pane-${socket}.fifo`);
  const errFifo = join(options.dir, `err-${socket}.fifo`);
  for (const f of [paneFifo, errFifo]) if (spawnSync("mkfifo", [f]).status !== 0) throw new Error("mkfifo failed");
  // Readers first: a FIFO's writer blocks until someone reads.
  const paneCat = Bun.spawn(["cat", paneFifo], { stdout: "pipe" });
  const errCat = Bun.spawn(["cat", errFifo], { stdout: "pipe" });
  const pane = new OutputWatch(paneCat.stdout);
  const err = new OutputWatch(errCat.stdout);

  // The pane holds `cat` until its output is piped, then runs the approver: nothing is missed.
  tmux("new-session", "-d", "-s", "ask", "-x", String(options.columns), "-y", String(options.rows), "cat");
  tmux("set-option", "-t", "ask", "remain-on-exit", "on");
  tmux("pipe-pane", "-O", "-t", "ask", `cat > ${shellQuote(paneFifo)}`);
  const command = `exec ${[BINARY, ...options.args].map(shellQuote).join(" ")} 2> ${shellQuote(errFifo)}`;
  tmux("respawn-pane", "-k", "-t", "ask", command);

  const cleanup = () => {
    spawnSync("tmux", ["-L", socket, "kill-server"], { env });
    // kill-server leaves the socket file behind.
    rmSync(join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`, socket), { force: true });
    paneCat.kill();
    errCat.kill();
  };
  let port: number;
  try {
    port = Number((await err.waitFor(/listening on https:\/\/127\.0\.0\.1:(\d+)/))[1]);
  } catch (e) {
    cleanup();
    throw e;
  }
  return {
    port,
    pane,
    err,
    capture: () => tmux("capture-pane", "-p", "-t", "ask"),
    resize: (columns, rows) => {
      tmux("resize-window", "-t", "ask", "-x", String(columns), "-y", String(rows));
    },
    type: (line) => {
      const at = pane.text.length;
      tmux("send-keys", "-t", "ask", "-l", line);
      tmux("send-keys", "-t", "ask", "Enter");
      return at;
    },
    [Symbol.asyncDispose]: async () => {
      cleanup();
      await Promise.all([paneCat.exited, errCat.exited]);
    },
  };
}
