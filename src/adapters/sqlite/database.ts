// Opening a SQLite ledger: pragmas every ledger needs, and versioned migrations kept in
// PRAGMA user_version. The tests run the same migrations as production.
import { Database } from "bun:sqlite";
import { basename, dirname, join } from "node:path";
import { checkPrivateFile, createPrivateFileIfMissing, expectSameFile, type FileIdentity, openPrivateDir } from "../../core/private-files.ts";

/**
 * A migration is one SQL script, and for rows SQL alone cannot convert a step run after it in
 * the same transaction; its version is its 1-based position in the list.
 */
export type Migration = { name: string; sql: string; convert?: (db: Database) => void };

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

/** The files SQLite keeps beside a database; a planted one would be read into it at open. */
const SIDE_FILES = ["-wal", "-shm", "-journal"] as const;

/** A database file and the side files SQLite may keep beside it. */
export function sqliteFiles(path: string): string[] {
  return [path, ...SIDE_FILES.map((side) => path + side)];
}

/**
 * Readies an on-disk SQLite file for trust, before SQLite opens it: its directory passes
 * openPrivateDir, the file is created exclusively with mode 0600 when missing (SQLite then gives
 * its -wal, -shm and -journal files the same mode), and it and any side file already there are
 * private files (checkPrivateFile). Throws PrivatePathError. Returns the canonical path to open
 * and what it names, for afterSqliteOpen.
 */
export function beforeSqliteOpen(path: string): { path: string; identity: FileIdentity } {
  const canonical = join(openPrivateDir(dirname(path), { create: false }).path, basename(path));
  // Everything already there is judged before the database is made: a refusal changes nothing.
  for (const file of sqliteFiles(canonical)) checkPrivateFile(file, { mayBeMissing: true });
  createPrivateFileIfMissing(canonical, () => new Uint8Array());
  return { path: canonical, identity: checkPrivateFile(canonical)! };
}

/** After SQLite opened it: the name still holds the file checked, and the side files it made are private. */
export function afterSqliteOpen(opened: { path: string; identity: FileIdentity }): void {
  expectSameFile(opened.path, opened.identity);
  for (const side of SIDE_FILES) checkPrivateFile(opened.path + side, { mayBeMissing: true });
}

/**
 * Opens (creating when missing) the SQLite file at `path` (":memory:" for tests) and brings its
 * schema to the newest version. A file on disk is trusted only as a private file (beforeSqliteOpen;
 * PrivatePathError otherwise). A database written by a newer binary is refused, so an old binary
 * never writes into a schema it does not know.
 */
export function openLedger(path: string, options: OpenOptions): Database {
  const file = path === ":memory:" ? null : beforeSqliteOpen(path);
  const db = new Database(file?.path ?? path, { create: true, strict: true });
  try {
    if (file !== null) expectSameFile(file.path, file.identity);
    db.run(`PRAGMA busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
    if (path !== ":memory:") db.run("PRAGMA journal_mode = WAL");
    db.run(`PRAGMA synchronous = ${options.synchronous ?? "FULL"}`);
    db.run("PRAGMA foreign_keys = ON");
    migrate(db, options.migrations);
    if (file !== null) afterSqliteOpen(file);
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
      throw new LedgerOpenError(`the database schema is version ${current}, newer than this binary knows (${known}); use a newer ask-only`);
    }
    for (let version = current + 1; version <= known; version++) {
      const migration = migrations[version - 1]!;
      db.run(migration.sql);
      migration.convert?.(db);
      db.run(`PRAGMA user_version = ${version}`);
    }
  }).immediate();
}
