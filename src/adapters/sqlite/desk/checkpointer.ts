// Checkpoints the WAL from a worker thread, never inside the commit that crosses SQLite's
// threshold: that commit would stall the call it answers by milliseconds. The desk's own
// connection keeps a high threshold as a backstop, in case the thread falls behind.
import type { Database } from "bun:sqlite";
import { CHECKPOINT_WORKER_SOURCE } from "./checkpoint-worker.ts";

/** WAL pages after which the desk's own connection checkpoints anyway (the worker's backstop). */
const BACKSTOP_CHECKPOINT_PAGES = 20_000;

export type CheckpointResult = { busy: number; log: number; checkpointed: number };

export class Checkpointer {
  private worker: Worker | null;

  constructor(db: Database, path: string, everyMs: number) {
    db.run(`PRAGMA wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
    db.run(`PRAGMA journal_size_limit = ${64 * 1024 * 1024}`);
    const worker = new Worker(URL.createObjectURL(new Blob([CHECKPOINT_WORKER_SOURCE], { type: "application/javascript" })));
    worker.postMessage({ op: "start", path, everyMs });
    // Bun's Worker can be unref'd: the thread alone never keeps the process alive.
    (worker as Worker & { unref(): void }).unref();
    this.worker = worker;
  }

  /** Runs a checkpoint on the thread now (tests); null once stopped. */
  now(): Promise<CheckpointResult | null> {
    const worker = this.worker;
    if (worker === null) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const onMessage = (e: MessageEvent) => {
        if (e.data.op !== "now") return;
        worker.removeEventListener("message", onMessage);
        if (e.data.error) reject(new Error(e.data.error));
        else resolve(e.data.result);
      };
      worker.addEventListener("message", onMessage);
      worker.postMessage({ op: "now" });
    });
  }

  /** Stops the thread after a last checkpoint. */
  async stop(): Promise<void> {
    const worker = this.worker;
    if (worker === null) return;
    this.worker = null;
    await new Promise<void>((resolve) => {
      worker.addEventListener("message", (e: MessageEvent) => {
        if (e.data.op === "stopped") resolve();
      });
      worker.postMessage({ op: "stop" });
    });
    worker.terminate();
  }

  /** Ends the thread at once (no last checkpoint). */
  terminate(): void {
    this.worker?.terminate();
    this.worker = null;
  }
}
