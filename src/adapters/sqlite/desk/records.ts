// Reading what the SQLite desk ledger recorded: receipts, the audit log, held results; and the
// published signing keys and the desk's own settings (meta).
import type { RecordStore } from "../../../core/desk/ports.ts";
import type { AuditEntry, AuditFilter, HeldResult, ReceiptRecord, SigningKeyRecord } from "../../../core/desk/records.ts";
import type { ReceiptJwk } from "../../../core/receipt/index.ts";
import type { Sql } from "./connection.ts";
import { type AuditRow, auditOf, type ReceiptRow, receiptOf, type SigningKeyRow, signingKeyOf } from "./rows.ts";

export class SqliteRecords implements RecordStore {
  constructor(private readonly sql: Sql) {}

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

  async receipts(filter: { orgId: string | null; sinceMs: number | null }): Promise<ReceiptRecord[]> {
    const rows = this.sql.db
      .query(
        `SELECT * FROM receipts WHERE (:org IS NULL OR org_id = :org) AND (:since IS NULL OR issued_at >= :since)
         ORDER BY rowid`,
      )
      .all({ org: filter.orgId, since: filter.sinceMs }) as ReceiptRow[];
    return rows.map(receiptOf);
  }

  async audit(filter: AuditFilter): Promise<AuditEntry[]> {
    const rows = this.sql.db
      .query(
        `SELECT at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id FROM audit
         WHERE (:org IS NULL OR org_id = :org) AND (:key IS NULL OR key_id = :key) AND (:since IS NULL OR at >= :since)
         ORDER BY id LIMIT :limit`,
      )
      .all({ org: filter.orgId, key: filter.keyId, since: filter.sinceMs, limit: filter.limit }) as AuditRow[];
    return rows.map(auditOf);
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
