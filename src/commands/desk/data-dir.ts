// The desk's data directory: desk.db, the receipt-signing key and the sealing key, each created
// exclusively with mode 0600 on first start. Every start trusts the directory and its files only
// as core/private-files.ts allows (this user's, private, no links), so a directory prepared by
// another user, or a key planted in it, stops the desk instead of becoming its signing key.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { failure } from "../../cli/voice.ts";
import { beforeSqliteOpen, sqliteFiles } from "../../adapters/sqlite/database.ts";
import { SqliteDeskLedger, type SqliteDeskLedgerOptions } from "../../adapters/sqlite/desk/ledger.ts";
import { DataDirLock, LOCK_FILE } from "../../adapters/sqlite/lock.ts";
import { newId } from "../../core/desk/secrets.ts";
import {
  canonicalPath,
  checkPrivateFile,
  createPrivateFileIfMissing,
  openPrivateDir,
  PrivatePathError,
  readPrivateFile,
  replacePrivateFile,
} from "../../core/private-files.ts";

const DB_FILE = "desk.db";
const SIGNING_KEY_FILE = "receipt-signing.key";
const SEALING_KEY_FILE = "sealing.key";
/** This node's id among the desks sharing one PostgreSQL ledger (made at its first start there). */
const NODE_ID_FILE = "node-id";

export type DataDir = { path: string; db: string; signingKey: string; sealingKey: string; nodeId: string; lock: string };

/** Runs a file-trust step, turning a refusal into the command's failure with its hint. */
function trusted<T>(step: () => T): T {
  try {
    return step();
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    throw err;
  }
}

/** The files of the data directory, named through its canonical path (no link in a parent is followed later). */
export function dataDirPaths(dir: string): DataDir {
  const path = trusted(() => canonicalPath(dir));
  return {
    path,
    db: join(path, DB_FILE),
    signingKey: join(path, SIGNING_KEY_FILE),
    sealingKey: join(path, SEALING_KEY_FILE),
    nodeId: join(path, NODE_ID_FILE),
    lock: join(path, LOCK_FILE),
  };
}

/**
 * Takes the data directory's lock before anything else touches it, or stops: a second desk on
 * the same ledger would refund the first one's calls in flight as abandoned at its start-up.
 */
export function lockDataDir(d: DataDir): DataDirLock {
  trusted(() => {
    openPrivateDir(d.path, { create: true });
    // Every file already there is judged before anything is made: a refused directory is left as it was.
    for (const p of [...sqliteFiles(d.lock), ...sqliteFiles(d.db), d.signingKey, d.sealingKey, d.nodeId]) checkPrivateFile(p, { mayBeMissing: true });
  });
  let lock: DataDirLock | null;
  try {
    lock = DataDirLock.acquire(d.lock, process.pid, Date.now());
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    // Not a lock file SQLite can open (overwritten by hand, say): nothing to tell who holds it.
    throw failure(`cannot lock ${d.lock}: ${String((err as { code?: unknown }).code ?? "error")}`, "if no desk runs on this directory, remove that file");
  }
  if (lock === null) {
    throw failure(`another desk is running on ${d.path} (it holds ${d.lock})`, "stop that desk first, or give this desk its own --data directory");
  }
  return lock;
}

/** Replaces a secret file atomically (write beside it exclusively, then rename over it). */
export function replaceSecretFile(path: string, contents: string): void {
  replacePrivateFile(path, contents);
}

/**
 * Checks the directory, creates any missing file and checks every one (the ledger's side files
 * too); returns which files were made now. With the ledger in PostgreSQL (`ledger: "postgres"`)
 * there is no desk.db, and the node's id is kept instead.
 */
export function prepareDataDir(d: DataDir, generateSigningPem: () => string, ledger: "sqlite" | "postgres" = "sqlite"): { created: string[] } {
  return trusted(() => {
    openPrivateDir(d.path, { create: true });
    const created: string[] = [];
    // An empty file is an empty SQLite database: creating it first fixes its mode at 0600.
    if (ledger === "sqlite" && createPrivateFileIfMissing(d.db, () => new Uint8Array())) created.push(DB_FILE);
    if (ledger === "postgres" && createPrivateFileIfMissing(d.nodeId, () => `${newId("node")}\n`)) created.push(NODE_ID_FILE);
    if (createPrivateFileIfMissing(d.signingKey, generateSigningPem)) created.push(SIGNING_KEY_FILE);
    if (createPrivateFileIfMissing(d.sealingKey, () => new Uint8Array(randomBytes(32)))) created.push(SEALING_KEY_FILE);
    if (ledger === "sqlite") beforeSqliteOpen(d.db);
    for (const p of [d.signingKey, d.sealingKey, ...(ledger === "postgres" ? [d.nodeId] : [])]) checkPrivateFile(p);
    return { created };
  });
}

/** A secret of the data directory, read from the descriptor that passed the checks. */
export function readSecret(path: string): Buffer {
  return trusted(() => readPrivateFile(path));
}

/** Opens the desk ledger of the directory; its files are checked again around SQLite's open. */
export function openDeskLedger(d: DataDir, options: SqliteDeskLedgerOptions): SqliteDeskLedger {
  return trusted(() => new SqliteDeskLedger(d.db, options));
}
