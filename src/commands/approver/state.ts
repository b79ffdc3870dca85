// The approver's state directory (the directory of --db): the ask ledger, the decision-signing
// key and the lock that keeps one approver per ledger. Every file is trusted only as
// core/private-files.ts allows (this user's, private, no links), so a key planted by another
// user stops the approver instead of signing its decisions.
import { basename, dirname, join } from "node:path";
import { failure } from "../../cli/voice.ts";
import { type DecisionSigner, decisionSigner } from "../../core/decision/sign.ts";
import { AskLedger, type Clock } from "../../adapters/sqlite/asks.ts";
import { LedgerOpenError, sqliteFiles } from "../../adapters/sqlite/database.ts";
import { DataDirLock } from "../../adapters/sqlite/lock.ts";
import { checkPrivateFile, createPrivateFileIfMissing, openPrivateDir, PrivatePathError, readPrivateFile } from "../../core/private-files.ts";
import { generateSigningKey, loadSigningKey, ReceiptKeyError, type SigningKey } from "../../core/receipt/sign.ts";

/** Beside the ledger: the key that signs every decision record. */
export const DECISION_KEY_FILE = "decision-signing.key";

export type State = { ledger: AskLedger; key: SigningKey; signer: DecisionSigner; keyPath: string; keyCreated: boolean };

const errnoCode = (err: unknown) => (err as NodeJS.ErrnoException)?.code ?? (err instanceof Error ? err.name : "unknown");

function trusted<T>(step: () => T): T {
  try {
    return step();
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    throw err;
  }
}

/** The lock file of a ledger: `asks.db.lock` beside `asks.db`. */
export const lockPathOf = (dbPath: string): string => join(dirname(dbPath), `${basename(dbPath)}.lock`);

/**
 * The state directory and every file the approver would use in it, judged before anything is
 * made or changed: a refusal leaves them as they were. 0700, this user's, private files only:
 * the asks of one person are nobody else's business on a shared machine, and a ledger or key
 * another user could write would hold or sign their decisions.
 */
function checkState(dbPath: string): string {
  return trusted(() => {
    const dir = openPrivateDir(dirname(dbPath), { create: true }).path;
    const files = [...sqliteFiles(join(dir, basename(dbPath))), ...sqliteFiles(lockPathOf(join(dir, basename(dbPath)))), join(dir, DECISION_KEY_FILE)];
    for (const file of files) checkPrivateFile(file, { mayBeMissing: true });
    return dir;
  });
}

/** Takes the ledger's lock, or stops: another approver serves this ledger. */
export function lockLedger(dbPath: string): DataDirLock {
  checkState(dbPath);
  const path = lockPathOf(dbPath);
  let lock: DataDirLock | null;
  try {
    lock = DataDirLock.acquire(path, process.pid, Date.now());
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    throw failure(`cannot lock ${path}: ${errnoCode(err)}`, "if no approver runs on this ledger, remove that file");
  }
  if (lock === null) {
    throw failure(`another approver is running on ${dbPath} (it holds ${path})`, "stop that approver first, or give this one its own --db");
  }
  return lock;
}

/**
 * Opens the ledger and the decision-signing key (made, mode 0600, on first use; parsed once),
 * and remembers the key's public half in the ledger, so it stays in the key set once retired.
 */
export function openState(dbPath: string, clock: Clock): State {
  const dir = checkState(dbPath);
  const keyPath = join(dir, DECISION_KEY_FILE);
  const keyCreated = trusted(() => createPrivateFileIfMissing(keyPath, () => generateSigningKey().privatePem));
  let key: SigningKey;
  try {
    key = loadSigningKey(trusted(() => readPrivateFile(keyPath)).toString("utf8"), `the decision-signing key ${keyPath}`);
  } catch (err) {
    if (err instanceof ReceiptKeyError)
      throw failure(
        err.message,
        `move it away: the next start makes a new key (the old one's records then need its public key, from --print-decision-keys of before)`,
      );
    throw err;
  }
  const signer = decisionSigner(key);
  let ledger: AskLedger;
  try {
    ledger = AskLedger.open(dbPath, clock, signer);
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    if (err instanceof LedgerOpenError) throw failure(`${dbPath}: ${err.message}`);
    throw failure(`cannot open the ask ledger ${dbPath}: ${errnoCode(err)}`, "check the path and its permissions, or choose another with --db PATH");
  }
  ledger.rememberKey(key.publicJwk());
  return { ledger, key, signer, keyPath, keyCreated };
}
