// Reading what the SQLite desk ledger recorded: receipts, the audit log, held results; and the
// published signing keys and the desk's own settings (meta).
import { auditOfReceipt, mergeAudit } from "../../../core/desk/audit-log.ts";
import type { RecordStore } from "../../../core/desk/ports.ts";
import type { AuditEntry, AuditFilter, HeldResult, ReceiptRecord, SigningKeyRecord } from "../../../core/desk/records.ts";
import type { ReceiptJwk } from "../../../core/receipt/index.ts";
import type { Sql } from "./connection.ts";
import { type ExportFilter, exportBound, exportChunks } from "./export-pages.ts";
import { conditions } from "./conditions.ts";
import type { ExportThreads } from "./export-thread.ts";
import { type AuditRow, auditOf, type ReceiptRow, receiptOf, type SigningKeyRow, signingKeyOf } from "./rows.ts";

export class SqliteRecords implements RecordStore {
  /** `exports`: the threads that read the export on connections of their own; null for a ledger in memory, read on this thread. */
  constructor(
    private readonly sql: Sql,
    private readonly exports: ExportThreads | null = null,
  ) {}

  async receipt(id: string): Promise<ReceiptRecord | null> {
    const row = this.sql.db.query("SELECT * FROM receipts WHERE id = ?").get(id) as ReceiptRow | null;
    return row === null ? null : receiptOf(row);
  }

  async keyReceipts(keyId: string, sinceMs: number, limit: number): Promise<ReceiptRecord[]> {
    const rows = this.sql.db
      .query("SELECT * FROM receipts WHERE key_id = :key AND issued_at >= :since ORDER BY seq LIMIT :limit")
      .all({ key: keyId, since: sinceMs, limit }) as ReceiptRow[];
    return rows.map(receiptOf);
  }

  async *receiptPages(filter: { orgId: string | null; sinceMs: number | null }, pageSize: number): AsyncGenerator<ReceiptRecord[]> {
    // Receipts are append-only and rowids grow: pages by rowid, up to the last one stored now,
    // are exactly the receipts of one moment, read without a transaction held open.
    const last = exportBound(this.sql.db);
    const where = conditions({ org_id: filter.orgId }, { issued_at: filter.sinceMs });
    const page = this.sql.db.query(
      `SELECT rowid AS cursor, * FROM receipts ${where.sql === "" ? "WHERE" : `${where.sql} AND`} rowid > $after AND rowid <= $last
       ORDER BY rowid LIMIT $limit`,
    );
    for (let after = 0; ; ) {
      const rows = page.all({ ...where.params, $after: after, $last: last, $limit: pageSize }) as (ReceiptRow & { cursor: number })[];
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.cursor;
      yield rows.map(receiptOf);
    }
  }

  exportChunks(filter: ExportFilter, signal?: AbortSignal): AsyncIterable<Uint8Array> {
    // Fixed here, on the desk's connection, when the export is asked for: never inside a
    // transaction (the group commit's run within one turn), so every receipt up to it is
    // committed and the export thread's connection sees it.
    const last = exportBound(this.sql.db);
    return this.exports?.chunks(filter, last, signal) ?? inThread(this.sql, filter, last);
  }

  /**
   * The audit table's rows and the entries read out of receipts, each branch cut to the limit by
   * its own index-driven query, then merged (mergeAudit). A receipt whose audit row migration 12
   * kept is answered by that row, not twice.
   */
  async audit(filter: AuditFilter): Promise<AuditEntry[]> {
    const db = this.sql.db;
    const plain = conditions({ org_id: filter.orgId, key_id: filter.keyId }, { at: filter.sinceMs });
    const rows = db
      .query(
        `SELECT at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id FROM audit
         ${plain.sql} ORDER BY id LIMIT $limit`,
      )
      .all({ ...plain.params, $limit: filter.limit }) as AuditRow[];
    // A key's receipts by its chain (its write order), an org's by its index in rowid order, all of them by rowid.
    const signed = conditions({ key_id: filter.keyId, org_id: filter.orgId }, { issued_at: filter.sinceMs });
    const receipts = db
      .query(
        `SELECT issued_at, payload FROM receipts ${signed.sql === "" ? "WHERE" : `${signed.sql} AND`}
           NOT EXISTS (SELECT 1 FROM audit AS kept WHERE kept.receipt_id = receipts.id)
         ORDER BY ${filter.keyId === null ? "rowid" : "seq"} LIMIT $limit`,
      )
      .all({ ...signed.params, $limit: filter.limit }) as { issued_at: number; payload: string }[];
    return mergeAudit(
      receipts.map((r) => auditOfReceipt(r.payload, r.issued_at)),
      rows.map(auditOf),
      filter.limit,
    );
  }

  async heldResult(receiptId: string, now: number): Promise<HeldResult | null> {
    const row = this.sql.db.query("SELECT key_id, result, held_until FROM held_results WHERE receipt_id = ? AND held_until > ?").get(receiptId, now) as {
      key_id: string;
      result: string;
      held_until: number;
    } | null;
    if (row === null) return null;
    return { receiptId, keyId: row.key_id, result: JSON.parse(row.result) as Record<string, unknown>, heldUntil: row.held_until };
  }

  async heldAmong(receiptIds: readonly string[], now: number): Promise<Set<string>> {
    if (receiptIds.length === 0) return new Set();
    const rows = this.sql.db
      .query(`SELECT receipt_id FROM held_results WHERE held_until > ? AND receipt_id IN (${receiptIds.map(() => "?").join(", ")})`)
      .all(now, ...receiptIds) as { receipt_id: string }[];
    return new Set(rows.map((r) => r.receipt_id));
  }

  async addSigningKey(kid: string, publicJwk: ReceiptJwk, now: number): Promise<void> {
    this.sql.immediate(() => {
      this.sql.db.query("UPDATE signing_keys SET retired_at = ? WHERE retired_at IS NULL AND kid <> ?").run(now, kid);
      this.sql.db
        .query("INSERT INTO signing_keys (kid, public_jwk, created_at) VALUES (?, ?, ?) ON CONFLICT (kid) DO NOTHING")
        .run(kid, JSON.stringify(publicJwk), now);
    });
  }

  async signingKeys(): Promise<SigningKeyRecord[]> {
    return (this.sql.db.query("SELECT * FROM signing_keys ORDER BY created_at, kid").all() as SigningKeyRow[]).map(signingKeyOf);
  }

  async meta(name: string): Promise<string | null> {
    const row = this.sql.db.query("SELECT value FROM meta WHERE name = ?").get(name) as { value: string } | null;
    return row?.value ?? null;
  }

  async setMetaOnce(name: string, value: string): Promise<boolean> {
    return this.sql.db.query("INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING").run(name, value).changes === 1;
  }
}

/** The export of a ledger no second connection can open (in memory), on the calling thread: a chunk per pull. */
async function* inThread(sql: Sql, filter: ExportFilter, last: number): AsyncGenerator<Uint8Array> {
  yield* exportChunks(sql.db, filter, last);
}
