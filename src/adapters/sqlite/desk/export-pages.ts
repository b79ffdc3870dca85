// The receipts export of the SQLite desk ledger as bytes: its NDJSON lines (each receipt's
// envelope text, then "\n"), read a page of rows at a time and handed out in chunks of about
// EXPORT_CHUNK_BYTES. One reader for both places it runs: the export thread (export-thread.ts)
// and, for a ledger in memory that no second connection can open, the calling thread.
import type { Database } from "bun:sqlite";
import { envelopeText } from "../../../core/receipt/index.ts";
import { conditions } from "./conditions.ts";

export type ExportFilter = { orgId: string | null; sinceMs: number | null };

/** Bytes of NDJSON a chunk reaches before it is handed out: a few dozen receipts. */
export const EXPORT_CHUNK_BYTES = 64 * 1024;

/** Rows per statement: a chunk is read in a few short statements, none holding a read transaction past it. */
const EXPORT_PAGE_ROWS = 16;

/**
 * The statement that reads a page of the export: only what the envelope is made of, so no
 * generated column is computed for a row it does not filter on. The WHERE clause names only the
 * filters given: `(:x IS NULL OR col = :x)` would keep SQLite from the org index.
 */
export function exportPageStatement(filter: ExportFilter): { sql: string; params: Record<string, string | number> } {
  const where = conditions({ org_id: filter.orgId }, { issued_at: filter.sinceMs });
  return {
    sql: `SELECT rowid AS cursor, payload, signature, envelope FROM receipts ${where.sql === "" ? "WHERE" : `${where.sql} AND`} rowid > $after AND rowid <= $last ORDER BY rowid LIMIT $limit`,
    params: where.params,
  };
}

/** The last rowid stored now: receipts are append-only and rowids grow, so the export of this moment ends there. */
export function exportBound(db: Database): number {
  return (db.query("SELECT max(rowid) AS last FROM receipts").get() as { last: number | null }).last ?? 0;
}

type ExportRow = { cursor: number; payload: string; signature: Uint8Array; envelope: string | null };

/**
 * The export's chunks, up to rowid `last`, each read only when the one before was taken: pages by
 * rowid are exactly the receipts of one moment, read without a transaction held open.
 */
export function* exportChunks(db: Database, filter: ExportFilter, last: number, chunkBytes = EXPORT_CHUNK_BYTES): Generator<Uint8Array> {
  const { sql, params } = exportPageStatement(filter);
  const page = db.query(sql);
  const encoder = new TextEncoder();
  let after = 0;
  for (;;) {
    let text = "";
    let done = false;
    while (text.length < chunkBytes) {
      const rows = page.all({ ...params, $after: after, $last: last, $limit: EXPORT_PAGE_ROWS }) as ExportRow[];
      for (const r of rows) text += `${r.envelope ?? envelopeText({ payload: r.payload, signature: r.signature })}\n`;
      if (rows.length < EXPORT_PAGE_ROWS) {
        done = true;
        break;
      }
      after = rows[rows.length - 1]!.cursor;
    }
    if (text !== "") yield encoder.encode(text);
    if (done) return;
  }
}
