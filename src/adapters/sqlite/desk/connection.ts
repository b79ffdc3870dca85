// What every store of the SQLite desk ledger shares: the one connection, its IMMEDIATE
// transaction wrapper, and how a constraint failure and a period's spend read in SQL.
import type { Database } from "bun:sqlite";

export type Sql = {
  readonly db: Database;
  /** Runs `body` in one IMMEDIATE transaction (a savepoint when already inside one, except in `whole`). */
  immediate<T>(body: () => T): T;
  /**
   * Runs `body` in one IMMEDIATE transaction in which every nested `immediate` runs inline, with
   * no savepoint of its own: one that throws rolls the whole transaction back, not itself alone.
   * A savepoint costs two statements and an undo copy of each page it first changes.
   */
  whole<T>(body: () => T): T;
  /**
   * Runs `body` in one IMMEDIATE transaction committed with `synchronous = FULL`, whatever the
   * connection's own setting: in WAL mode the commit syncs the log before it returns, so the
   * change survives a power loss, not only a crash of the process. For the rare writes that must
   * never be undone (a rotated refresh token is the only copy of a grant); never nested.
   */
  durably<T>(body: () => T): T;
};

export function sqlOf(db: Database): Sql {
  // Built once: `db.transaction(fn)` builds four wrappers each time, which costs more than the
  // short statements of a clearing step. Nested inside the group commit it is a savepoint.
  const tx = db.transaction((body: () => unknown) => body()).immediate;
  let inline = false;
  const immediate = <T>(body: () => T) => (inline ? body() : (tx(body) as T));
  const whole = <T>(body: () => T): T => {
    if (db.inTransaction) throw new Error("a whole transaction cannot nest in another");
    inline = true;
    try {
      return tx(body) as T;
    } finally {
      inline = false;
    }
  };
  const durably = <T>(body: () => T): T => {
    if (db.inTransaction) throw new Error("a durable write cannot nest in another transaction");
    const level = (db.query("PRAGMA synchronous").get() as { synchronous: number }).synchronous;
    // 2 is FULL, 3 EXTRA: already as durable as asked.
    if (level >= 2) return immediate(body);
    db.run("PRAGMA synchronous = FULL");
    try {
      return immediate(body);
    } finally {
      db.run(`PRAGMA synchronous = ${level}`);
    }
  };
  return { db, immediate, whole, durably };
}

export const isConstraint = (err: unknown) => err instanceof Error && String((err as { code?: unknown }).code ?? "").startsWith("SQLITE_CONSTRAINT");

/**
 * What a key row has spent in the period `:period` (the key's period at the caller's `now`): its
 * row holds the spend of its latest period only. The one way the ledger reads it in SQL, as
 * `spentIn` (core/desk/records.ts) does in code.
 */
export const SPENT_IN_PERIOD = "(CASE WHEN period = :period THEN spent_mc ELSE 0 END)";
