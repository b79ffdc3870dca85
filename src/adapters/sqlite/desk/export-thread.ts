// The receipts export read and encoded on a thread of its own (export-worker.ts), so the desk's
// event loop only passes finished chunks to the client: reading the rows and deriving each
// envelope (its garbage too) stays off the thread that answers calls. Back-pressure: the thread
// reads a chunk only when asked, and is asked for the next one when the stream takes the one
// before (a bounded queue of one), so a slow or stopped reader holds two chunks (the one it was
// given, the one read ahead), never the ledger.
import { ExportsBusy } from "../../../core/desk/ports.ts";
import type { FileIdentity } from "../../../core/private-files.ts";
import { workerUrl } from "../../../worker-entries.ts";
import type { ExportFilter } from "./export-pages.ts";

export type ToExportThread = { op: "start"; path: string; identity: FileIdentity; busyTimeoutMs: number; filter: ExportFilter; last: number } | { op: "next" };
export type FromExportThread = { op: "chunk"; bytes: Uint8Array } | { op: "done" } | { op: "error"; error: string };

export type ExportSource = { path: string; identity: FileIdentity; busyTimeoutMs: number };

type Waiting = { go: () => void; fail: (err: Error) => void };

/**
 * Export threads at once; a further export waits for one to end before it reads. Each thread
 * is a heap and a connection of its own (~8 MB), so exports asked for together must not add up
 * to more than the desk's memory bound.
 */
export const MAX_EXPORT_THREADS = 2;

/**
 * How long a further export waits for a place before it is answered 503 EXPORTS_BUSY: a place
 * held by a reader that never reads is freed by the HTTP layer's idle limit, not by waiting.
 */
export const EXPORT_PLACE_WAIT_MS = 30_000;

const closedError = () => new Error("the ledger was closed during the receipts export");

/** Export threads running now, ended when the ledger closes (a reader that never finishes must not outlive it). */
export class ExportThreads {
  /** Each running thread, and how to fail the export it serves. */
  private readonly running = new Map<Worker, (err: Error) => void>();
  /** Exports holding one of the MAX_EXPORT_THREADS places (a thread, or about to start one). */
  private admitted = 0;
  /** Exports waiting for a place, first come first served: each is handed one, or failed when the ledger closes. */
  private readonly queued: Waiting[] = [];
  private closed = false;
  /** Chunks the threads have been asked for, and answers they gave, in all (tests of the back-pressure). */
  testOnlyChunksAsked = 0;
  testOnlyAnswers = 0;

  constructor(
    private readonly source: ExportSource,
    private readonly placeWaitMs = EXPORT_PLACE_WAIT_MS,
  ) {}

  /**
   * The export up to rowid `last`, a chunk per pull; the thread ends with the iteration, however
   * it ends. Waiting for a place ends with ExportsBusy after the wait, or at once when `signal`
   * aborts (the client went away): a waiter nobody reads for never takes a place.
   */
  async *chunks(filter: ExportFilter, last: number, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
    await this.place(signal);
    try {
      // handed a place just as the ledger closed: no thread may start on a closed ledger
      if (this.closed) throw closedError();
      yield* this.threadChunks(filter, last);
    } finally {
      // the place passes to the first export waiting, or is given back
      const next = this.queued.shift();
      if (next === undefined) this.admitted--;
      else next.go();
    }
  }

  private async place(signal?: AbortSignal): Promise<void> {
    if (this.closed) throw closedError();
    signal?.throwIfAborted();
    if (this.admitted < MAX_EXPORT_THREADS) {
      this.admitted++;
      return;
    }
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    const leave = (err: Error) => {
      const at = this.queued.indexOf(waiting);
      if (at >= 0) this.queued.splice(at, 1);
      reject(err);
    };
    const waiting: Waiting = { go: resolve, fail: reject };
    const timer = setTimeout(() => leave(new ExportsBusy()), this.placeWaitMs);
    const onAbort = () => leave(signal!.reason instanceof Error ? signal!.reason : new Error("the receipts export was cancelled"));
    signal?.addEventListener("abort", onAbort, { once: true });
    this.queued.push(waiting);
    try {
      await promise;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  private async *threadChunks(filter: ExportFilter, last: number): AsyncGenerator<Uint8Array> {
    // smol: a heap that collects more eagerly, since the thread's garbage is what it just sent
    const worker = new Worker(workerUrl("receiptExport"), { smol: true });
    let waiting: { resolve: (m: FromExportThread) => void; reject: (err: Error) => void } | null = null;
    let failed: Error | null = null;
    const fail = (err: Error) => {
      failed ??= err;
      waiting?.reject(failed);
      waiting = null;
    };
    this.running.set(worker, fail);
    worker.addEventListener("message", (e: MessageEvent<FromExportThread>) => {
      this.testOnlyAnswers++;
      const w = waiting;
      waiting = null;
      w?.resolve(e.data);
    });
    worker.addEventListener("error", (e: ErrorEvent) => fail(new Error(`the receipts export thread failed: ${e.message}`)));
    worker.addEventListener("messageerror", () => fail(new Error("the receipts export thread sent an unreadable chunk")));
    const ask = () => {
      const answer = new Promise<FromExportThread>((resolve, reject) => {
        if (failed !== null) return reject(failed);
        waiting = { resolve, reject };
        this.testOnlyChunksAsked++;
        worker.postMessage({ op: "next" } satisfies ToExportThread);
      });
      // Awaited at the next pull, or never when the reader stops first: a failure meanwhile is
      // not an unhandled rejection (which would end the process).
      answer.catch(() => {});
      return answer;
    };
    try {
      worker.postMessage({ op: "start", ...this.source, filter, last } satisfies ToExportThread);
      let next = ask();
      for (;;) {
        const m = await next;
        if (m.op === "done") return;
        if (m.op === "error") throw new Error(`the receipts export thread failed: ${m.error}`);
        // One chunk read ahead while this one is sent: the thread reads as the socket writes.
        next = ask();
        yield m.bytes;
      }
    } finally {
      this.running.delete(worker);
      worker.terminate();
    }
  }

  /** Export threads running now (tests). */
  testOnlyRunning(): number {
    return this.running.size;
  }

  /** Exports waiting for a thread (tests). */
  testOnlyQueued(): number {
    return this.queued.length;
  }

  /** Ends every export thread still running. */
  close(): void {
    this.closed = true;
    for (const [worker, fail] of this.running) {
      worker.terminate();
      fail(closedError());
    }
    this.running.clear();
    for (const place of this.queued.splice(0)) place.fail(closedError());
  }
}
