// Group commit: the operations queued in one event-loop turn share one IMMEDIATE transaction, so
// a burst of calls pays for one COMMIT (one fsync under FULL) instead of one each.
import type { Sql } from "./connection.ts";

/** Most operations one group commit carries; the rest go to the next one. */
const MAX_BATCH = 64;

type Queued = { run: () => unknown; resolve: (value: unknown) => void; reject: (error: unknown) => void };

export class GroupCommit {
  private queue: Queued[] = [];
  private flushScheduled = false;

  constructor(private readonly sql: Sql) {}

  /**
   * Runs `op` (a write that is its own transaction) inside the transaction shared with the other
   * operations queued in this turn. Each nests as a savepoint, so its money, receipt and audit
   * row still commit or roll back together; one that throws rolls back alone. The promise
   * settles after COMMIT: nothing is answered before it is durable.
   */
  run<T>(op: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run: op, resolve: resolve as (value: unknown) => void, reject });
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    const ops = this.queue.splice(0, MAX_BATCH);
    if (this.queue.length > 0) this.scheduleFlush();
    const results: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.sql.immediate(() => {
        for (const op of ops) {
          try {
            results.push({ ok: true, value: op.run() });
          } catch (error) {
            results.push({ ok: false, error });
          }
        }
      });
    } catch (error) {
      for (const op of ops) op.reject(error);
      return;
    }
    for (const [i, r] of results.entries()) {
      if (r.ok) ops[i]!.resolve(r.value);
      else ops[i]!.reject(r.error);
    }
  }
}
