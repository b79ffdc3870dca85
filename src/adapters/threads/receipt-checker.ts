// `desk check` on every core: pages of receipts are checked (signature, readable copy, row) on
// worker threads, one page to the thread with the fewest waiting, while the calling thread reads
// the ledger and follows the chains (core/desk/check.ts). A thread that fails fails every page
// still waiting, so no receipt is ever counted as checked without its answer.
import { availableParallelism } from "node:os";
import type { CheckedPage } from "../../core/desk/check-receipt.ts";
import type { ReceiptPageChecker } from "../../core/desk/ports.ts";
import type { StoredReceiptRecord } from "../../core/desk/records.ts";
import type { Jwks } from "../../core/receipt/index.ts";
import { workerUrl } from "../../worker-entries.ts";

export type ToThread = { op: "keys"; jwks: Jwks } | { op: "page"; id: number; page: StoredReceiptRecord[] };
export type FromThread = { id: number; checked: CheckedPage } | { id: number; error: string };

type Waiting = { resolve: (checked: CheckedPage) => void; reject: (err: Error) => void };
type Thread = { worker: Worker; waiting: Map<number, Waiting> };

/** One thread per core the process may use, at least one. */
export function checkThreadCount(): number {
  return Math.max(1, availableParallelism());
}

/**
 * Pages read between two collections on the calling thread. The pages are short-lived garbage,
 * and JavaScriptCore left to its own pace let `desk check` reach 275 MB RSS at 200k receipts;
 * a full collection every few pages (a few ms over a tiny live heap) keeps it near its floor.
 */
const RECEIPT_CHECK_GC_EVERY = 4;

export class ThreadedReceiptChecker implements ReceiptPageChecker {
  private readonly threads: Thread[] = [];
  private nextId = 0;
  private failed: Error | null = null;

  constructor(jwks: Jwks, count: number = checkThreadCount()) {
    for (let i = 0; i < Math.max(1, count); i++) {
      const worker = new Worker(workerUrl("receiptCheck"));
      const thread: Thread = { worker, waiting: new Map() };
      worker.addEventListener("message", (e: MessageEvent<FromThread>) => {
        const m = e.data;
        const w = thread.waiting.get(m.id);
        if (w === undefined) return;
        if ("error" in m) return this.fail(new Error(`a receipt check thread failed: ${m.error}`));
        thread.waiting.delete(m.id);
        w.resolve(m.checked);
      });
      worker.addEventListener("error", (e: ErrorEvent) => this.fail(new Error(`a receipt check thread failed: ${e.message}`)));
      worker.addEventListener("messageerror", () => this.fail(new Error("a receipt check thread sent an unreadable answer")));
      worker.postMessage({ op: "keys", jwks } satisfies ToThread);
      this.threads.push(thread);
    }
  }

  check(page: StoredReceiptRecord[]): Promise<CheckedPage> {
    if (this.failed !== null) return Promise.reject(this.failed);
    let thread = this.threads[0]!;
    for (const t of this.threads) if (t.waiting.size < thread.waiting.size) thread = t;
    const id = this.nextId++;
    if (id % RECEIPT_CHECK_GC_EVERY === RECEIPT_CHECK_GC_EVERY - 1) Bun.gc(true);
    return new Promise((resolve, reject) => {
      thread.waiting.set(id, { resolve, reject });
      thread.worker.postMessage({ op: "page", id, page } satisfies ToThread);
    });
  }

  async close(): Promise<void> {
    this.fail(new Error("the receipt checker was closed"));
    for (const t of this.threads) t.worker.terminate();
  }

  private fail(err: Error): void {
    this.failed ??= err;
    for (const t of this.threads) {
      for (const w of t.waiting.values()) w.reject(this.failed);
      t.waiting.clear();
    }
  }
}
