// What the benchmarks share: reading a child process's first announcement, quantiles, and a
// compiled desk started for the run with its admin client.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * Reads `stream` until `re` matches and returns its first group (a listening URL), then drains the
 * rest so the child never blocks on a full pipe.
 */
export async function firstLine(stream: ReadableStream<Uint8Array>, re: RegExp): Promise<string> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`no ${re} in: ${text}`);
    text += decoder.decode(value, { stream: true });
    const m = re.exec(text);
    if (m) {
      reader.releaseLock();
      stream.pipeTo(new WritableStream()).catch(() => {});
      return m[1]!;
    }
  }
}

/** The q-quantile (0..1) of `xs`, by the nearest rank below. */
export function quantile(xs: readonly number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export type BenchDesk = {
  /** The desk's process (its pid for /proc figures). */
  proc: Bun.Subprocess;
  url: string;
  /** An admin API call; a status of 300 or more throws with the answer's text. */
  admin(method: string, path: string, body?: unknown): Promise<Record<string, unknown>>;
  /** Stops the desk, and removes its data directory unless the caller gave it. */
  stop(): Promise<void>;
};

export type StartOptions = {
  /** A data directory the caller keeps (a desk started again on the same ledger); a fresh one otherwise. */
  data?: string;
  /** More flags for `desk`. */
  flags?: string[];
  /** More environment (a database URL, say). */
  env?: Record<string, string>;
};

/** Starts `command desk` on a port of its own, and resolves once it listens. */
export async function startDesk(command: string[], adminToken: string, options: StartOptions = {}): Promise<BenchDesk> {
  const owned = options.data === undefined ? mkdtempSync(join(tmpdir(), "ask-only-bench-desk-")) : null;
  const dataDir = options.data ?? join(owned!, "d");
  const proc = Bun.spawn([...command, "desk", "--listen", "127.0.0.1:0", "--data", dataDir, ...(options.flags ?? [])], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ASK_ONLY_DESK_ADMIN_TOKEN: adminToken, NO_COLOR: "1", TZ: "Etc/UTC", ...(options.env ?? {}) },
    stdout: "ignore",
    stderr: "pipe",
  });
  const url = await firstLine(proc.stderr as ReadableStream<Uint8Array>, /desk listening on (http:\/\/\S+)\n/);
  return {
    proc,
    url,
    async admin(method, path, body) {
      const r = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
      return r.json() as Promise<Record<string, unknown>>;
    },
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
      if (owned !== null) rmSync(owned, { recursive: true, force: true });
    },
  };
}
