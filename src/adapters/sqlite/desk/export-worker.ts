// The export thread's program (export-thread.ts): opens the ledger read-only on a connection of
// its own, checks that the name still holds the ledger the desk opened, then reads and encodes
// one chunk of the export each time it is asked, and nothing ahead of that.
import { Database } from "bun:sqlite";
import { setPriority } from "node:os";
import { expectSameFile } from "../../../core/private-files.ts";
import type { FromExportThread, ToExportThread } from "./export-thread.ts";
import { exportChunks } from "./export-pages.ts";

declare const self: Worker;

let chunks: Generator<Uint8Array> | null = null;
let db: Database | null = null;
/** Why the export could not start: the answer to every pull after it. */
let refused: string | null = null;
/**
 * Chunks between two full collections on this thread: its garbage is the envelopes just sent,
 * which left to the collector's pace grew the desk's RSS by +42 MB over an export of 200k
 * receipts alone (+34 MB so, +8 MB of it the thread itself; the export 18 % slower, off the
 * desk's thread).
 */
const EXPORT_GC_EVERY = 16;
let sent = 0;
/**
 * The thread's niceness. On Linux it applies to this thread alone (setpriority of thread 0); on
 * two cores an export read flat out took the core the desk's calls were queued for, and a call
 * that came meanwhile waited for the scheduler. The export runs at full speed on an idle core.
 */
const EXPORT_NICENESS = 10;
try {
  setPriority(EXPORT_NICENESS);
} catch {
  // not allowed here (a sandbox): the export still runs, at the desk's own priority
}

const answer = (m: FromExportThread, transfer: ArrayBuffer[] = []) => self.postMessage(m, transfer);
const reason = (err: unknown) => (err instanceof Error ? `${err.name}: ${err.message}` : "error");

self.onmessage = (e: MessageEvent<ToExportThread>) => {
  const m = e.data;
  if (m.op === "start") {
    try {
      db = new Database(m.path, { readonly: true });
      // A file put in the ledger's place since the desk opened it would be exported as the desk's.
      expectSameFile(m.path, m.identity);
      db.run(`PRAGMA busy_timeout = ${m.busyTimeoutMs}`);
      chunks = exportChunks(db, m.filter, m.last);
    } catch (err) {
      refused = reason(err);
    }
    return;
  }
  try {
    if (chunks === null) throw new Error(refused ?? "the export was not started");
    const next = chunks.next();
    if (next.done) {
      db?.close();
      answer({ op: "done" });
      return;
    }
    answer({ op: "chunk", bytes: next.value }, [next.value.buffer as ArrayBuffer]);
    if (++sent % EXPORT_GC_EVERY === 0) Bun.gc(true);
  } catch (err) {
    answer({ op: "error", error: reason(err) });
  }
};
