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
   * operations queued in this turn; its money, receipt and audit row commit or roll back
   * together, and one that throws rolls back alone. The promise settles after COMMIT: nothing is
   * answered before it is durable. `op` may run twice (see flush): whatever it does outside the
   * database must be safe to repeat, the last run's being the one that counts.
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

  /**
   * The batch runs first as one plain transaction, with no savepoint per operation: none throws
   * on the money path's ordinary answers, so this is the common case. When one throws, that
   * transaction rolls back whole and the batch runs again, each operation in a savepoint of its
   * own, so only the one that throws is lost. A failure of BEGIN or COMMIT fails the batch.
   */
  private flush(): void {
    this.flushScheduled = false;
    const ops = this.queue.splice(0, MAX_BATCH);
    if (this.queue.length > 0) this.scheduleFlush();
    let opThrew = false;
    let values: unknown[];
    try {
      values = this.sql.whole(() =>
        ops.map((op) => {
          try {
            return op.run();
          } catch (error) {
            opThrew = true;
            throw error;
          }
        }),
      );
    } catch (error) {
      if (opThrew) this.flushEachAlone(ops);
      else for (const op of ops) op.reject(error);
      return;
    }
    for (const [i, value] of values.entries()) ops[i]!.resolve(value);
  }

  private flushEachAlone(ops: Queued[]): void {
    const results: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.sql.immediate(() => {
        for (const op of ops) {
          try {
            // Nested in the batch's transaction: a savepoint, which rolls back this operation alone.
            results.push({ ok: true, value: this.sql.immediate(op.run) });
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
