// One desk process per data directory. Two desks on one ledger would each treat the other's
// calls in flight as abandoned (the start-up sweep refunds every open reservation), keep tools,
// prices and upstream sessions in memory the other cannot see, and sign with keys the other may
// have rotated. The lock is SQLite's own exclusive file lock (POSIX fcntl) on a small file beside
// the ledger, held by the connection for the process lifetime: the kernel drops it when the
// process dies however it dies, so a desk killed with SIGKILL never blocks its restart.
import { Database } from "bun:sqlite";
import { afterSqliteOpen, beforeSqliteOpen } from "./database.ts";

export const LOCK_FILE = "desk.lock";

export class DataDirLock {
  private constructor(private db: Database | null) {}

  /**
   * Takes the lock on the file at `path` (created when missing), or returns null when another
   * process holds it. Never waits: a second desk must fail at once, not queue behind the first.
   * The file is trusted only as a private file (beforeSqliteOpen; PrivatePathError otherwise).
   */
  static acquire(path: string, pid: number, now: number): DataDirLock | null {
    const file = beforeSqliteOpen(path);
    const db = new Database(file.path, { create: true, strict: true });
    try {
      db.run("PRAGMA busy_timeout = 0");
      // EXCLUSIVE locking mode: once this connection has written, it keeps the lock until closed.
      db.run("PRAGMA locking_mode = EXCLUSIVE");
      db.run("CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, since INTEGER NOT NULL)");
      db.transaction(() => {
        db.run("DELETE FROM holder");
        db.query("INSERT INTO holder (pid, since) VALUES (?, ?)").run(pid, now);
      }).immediate();
      afterSqliteOpen(file);
      return new DataDirLock(db);
    } catch (err) {
      db.close();
      if (String((err as { code?: unknown }).code ?? "").startsWith("SQLITE_BUSY")) return null;
      throw err;
    }
  }

  release(): void {
    this.db?.close();
    this.db = null;
  }
}
