// Opening a SQLite ledger: pragmas every ledger needs, and versioned migrations kept in
// PRAGMA user_version. The tests run the same migrations as production.
import { Database } from "bun:sqlite";

/** A migration is one SQL script; its version is its 1-based position in the list. */
export type Migration = { name: string; sql: string };

export class LedgerOpenError extends Error {
  override name = "LedgerOpenError";
}

export type OpenOptions = {
  /** The ledger's migrations, oldest first. Never edit one that has shipped: append. */
  migrations: readonly Migration[];
  /** FULL survives power loss; NORMAL (in WAL) may lose the last commits on power loss only. */
  synchronous?: "FULL" | "NORMAL";
  busyTimeoutMs?: number;
};

/**
 * Opens (creating when missing) the SQLite file at `path` (":memory:" for tests) and brings its
 * schema to the newest version. A database written by a newer binary is refused, so an old
 * binary never writes into a schema it does not know.
 */
export function openLedger(path: string, options: OpenOptions): Database {
  const db = new Database(path, { create: true, strict: true });
  try {
    db.run(`PRAGMA busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
    if (path !== ":memory:") db.run("PRAGMA journal_mode = WAL");
    db.run(`PRAGMA synchronous = ${options.synchronous ?? "FULL"}`);
    db.run("PRAGMA foreign_keys = ON");
    migrate(db, options.migrations);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

export function schemaVersion(db: Database): number {
  return (db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
}

function migrate(db: Database, migrations: readonly Migration[]): void {
  const known = migrations.length;
  // IMMEDIATE: two processes opening the same new file must not both run migration 1.
  db.transaction(() => {
    const current = schemaVersion(db);
    if (current > known) {
      throw new LedgerOpenError(
        `the database schema is version ${current}, newer than this binary knows (${known}); use a newer ask-only`,
      );
    }
    for (let version = current + 1; version <= known; version++) {
      db.run(migrations[version - 1]!.sql);
      db.run(`PRAGMA user_version = ${version}`);
    }
  }).immediate();
}
