// The desk's data directory: desk.db, the receipt-signing key and the sealing key, each created
// exclusively with mode 0600 on first start and refused later if anyone else can read it.
import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync } from "node:fs";
import { join, resolve } from "node:path";
import { failure } from "../../cli/voice.ts";
import { DataDirLock, LOCK_FILE } from "../../core/ledger/desk-lock.ts";

const DB_FILE = "desk.db";
const SIGNING_KEY_FILE = "receipt-signing.key";
const SEALING_KEY_FILE = "sealing.key";

export type DataDir = { path: string; db: string; signingKey: string; sealingKey: string; lock: string };

export function dataDirPaths(dir: string): DataDir {
  const path = resolve(dir);
  return {
    path,
    db: join(path, DB_FILE),
    signingKey: join(path, SIGNING_KEY_FILE),
    sealingKey: join(path, SEALING_KEY_FILE),
    lock: join(path, LOCK_FILE),
  };
}

/**
 * Takes the data directory's lock before anything else touches it, or stops: a second desk on
 * the same ledger would refund the first one's calls in flight as abandoned at its start-up.
 */
export function lockDataDir(d: DataDir): DataDirLock {
  mkdirSync(d.path, { recursive: true, mode: 0o700 });
  try {
    createSecretFile(d.lock, new Uint8Array());
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw failure(`cannot create ${d.lock}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
  let lock: DataDirLock | null;
  try {
    lock = DataDirLock.acquire(d.lock, process.pid, Date.now());
  } catch (err) {
    // Not a lock file SQLite can open (overwritten by hand, say): nothing to tell who holds it.
    throw failure(`cannot lock ${d.lock}: ${String((err as { code?: unknown }).code ?? "error")}`, "if no desk runs on this directory, remove that file");
  }
  if (lock === null) {
    throw failure(`another desk is running on ${d.path} (it holds ${d.lock})`, "stop that desk first, or give this desk its own --data directory");
  }
  return lock;
}

/** Writes a new secret file: O_EXCL (never overwrites), mode 0600. */
function createSecretFile(path: string, contents: string | Uint8Array): void {
  const fd = openSync(path, "wx", 0o600);
  try {
    writeSync(fd, typeof contents === "string" ? Buffer.from(contents) : contents);
  } finally {
    closeSync(fd);
  }
}

/** Replaces a secret file atomically (write beside it exclusively, then rename over it). */
export function replaceSecretFile(path: string, contents: string): void {
  const partial = `${path}.${process.pid}.new`;
  createSecretFile(partial, contents);
  renameSync(partial, path);
}

/** Refuses a secret file that others could read: it would leak keys to every local user. */
function checkPrivate(path: string): void {
  const mode = statSync(path).mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw failure(`${path} is readable by others (mode ${mode.toString(8).padStart(4, "0")})`, `run: chmod 600 ${path}`);
  }
}

/** Creates the directory and any missing file; returns which files were made now. */
export function prepareDataDir(d: DataDir, generateSigningPem: () => string): { created: string[] } {
  const created: string[] = [];
  mkdirSync(d.path, { recursive: true, mode: 0o700 });
  if (!existsSync(d.db)) {
    // An empty file is an empty SQLite database: creating it first fixes its mode at 0600.
    createSecretFile(d.db, new Uint8Array());
    created.push(DB_FILE);
  }
  if (!existsSync(d.signingKey)) {
    createSecretFile(d.signingKey, generateSigningPem());
    created.push(SIGNING_KEY_FILE);
  }
  if (!existsSync(d.sealingKey)) {
    createSecretFile(d.sealingKey, new Uint8Array(randomBytes(32)));
    created.push(SEALING_KEY_FILE);
  }
  for (const p of [d.db, d.signingKey, d.sealingKey]) checkPrivate(p);
  return { created };
}

export function readSecret(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw failure(`cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
}

/** Keeps SQLite's side files (-wal, -shm) private too once they exist. */
export function privateSideFiles(db: string): void {
  for (const suffix of ["-wal", "-shm"]) {
    if (existsSync(db + suffix)) chmodSync(db + suffix, 0o600);
  }
}
