// The money invariants of `desk check` in SQL (the signatures and chains are checked by the
// domain, core/desk/check.ts): for every key and period, spent = charges + open reservations;
// the key row's spend equals its current period's; the same for organization budgets;
// reservation and receipt counts agree. Settled reservations pruned in housekeeping count
// through settled_pruned, the summary their deleting transaction wrote.
import type { LedgerCheck } from "../../../core/desk/ports.ts";
import type { KeptAuditRow, StoredReceiptRecord } from "../../../core/desk/records.ts";
import { printable } from "../../../core/receipt/printable.ts";
import type { Sql } from "./connection.ts";
import { type AuditRow, auditOf, type ReceiptRow, storedReceiptOf } from "./rows.ts";

export class SqliteCheck implements LedgerCheck {
  constructor(private readonly sql: Sql) {}

  async money(): Promise<string[]> {
    const db = this.sql.db;
    const problems: string[] = [];
    const rows = db
      .query(
        `SELECT s.key_id, s.period, s.spent_mc, s.charged_mc AS counted_charges,
           coalesce((SELECT sum(amount_mc) FROM receipts r WHERE r.key_id = s.key_id AND r.period = s.period AND r.outcome = 'charged'), 0) AS charged,
           coalesce((SELECT sum(price_mc) FROM reservations v WHERE v.key_id = s.key_id AND v.period = s.period AND v.state = 'open'), 0) AS open
         FROM spend s ORDER BY s.key_id, s.period`,
      )
      .all() as { key_id: string; period: string; spent_mc: number; counted_charges: number; charged: number; open: number }[];
    for (const r of rows) {
      if (r.counted_charges !== r.charged) {
        problems.push(`key ${printable(r.key_id)} period ${printable(r.period)}: ${r.counted_charges} mc counted as charged, but charges ${r.charged}`);
      }
      if (r.spent_mc !== r.charged + r.open) {
        problems.push(
          `key ${printable(r.key_id)} period ${printable(r.period)}: spent ${r.spent_mc} mc, but charges ${r.charged} + open reservations ${r.open}`,
        );
      }
    }
    const keys = db
      .query(
        "SELECT k.id, k.spent_mc, k.budget_mc, coalesce(s.spent_mc, 0) AS period_spent FROM keys k LEFT JOIN spend s ON s.key_id = k.id AND s.period = k.period",
      )
      .all() as { id: string; spent_mc: number; budget_mc: number; period_spent: number }[];
    for (const k of keys) {
      if (k.spent_mc !== k.period_spent) problems.push(`key ${printable(k.id)}: spent ${k.spent_mc} mc on the key, ${k.period_spent} mc in its period`);
    }
    // The same for organization budgets: what each org period spent is its charged and open reservations.
    const orgRows = db
      .query(
        `SELECT s.org_id, s.period, s.spent_mc, s.charged_mc AS counted_charges,
           coalesce((SELECT sum(price_mc) FROM reservations v WHERE v.org_id = s.org_id AND v.org_period = s.period AND v.outcome = 'charged'), 0)
             + coalesce((SELECT sum(charged_mc) FROM settled_pruned p WHERE p.org_id = s.org_id AND p.org_period = s.period), 0) AS charged,
           coalesce((SELECT sum(price_mc) FROM reservations v WHERE v.org_id = s.org_id AND v.org_period = s.period
             AND (v.state = 'open' OR v.outcome = 'charged')), 0)
             + coalesce((SELECT sum(charged_mc) FROM settled_pruned p WHERE p.org_id = s.org_id AND p.org_period = s.period), 0) AS counted
         FROM org_spend s ORDER BY s.org_id, s.period`,
      )
      .all() as { org_id: string; period: string; spent_mc: number; counted_charges: number; charged: number; counted: number }[];
    for (const r of orgRows) {
      if (r.counted_charges !== r.charged) {
        problems.push(`org ${printable(r.org_id)} period ${printable(r.period)}: ${r.counted_charges} mc counted as charged, but charges ${r.charged}`);
      }
      if (r.spent_mc !== r.counted) {
        problems.push(`org ${printable(r.org_id)} period ${printable(r.period)}: spent ${r.spent_mc} mc, but charges and open reservations ${r.counted}`);
      }
    }
    const orgs = db
      .query(
        "SELECT o.org_id, o.spent_mc, coalesce(s.spent_mc, 0) AS period_spent FROM org_budgets o LEFT JOIN org_spend s ON s.org_id = o.org_id AND s.period = o.period",
      )
      .all() as { org_id: string; spent_mc: number; period_spent: number }[];
    for (const o of orgs) {
      if (o.spent_mc !== o.period_spent) problems.push(`org ${printable(o.org_id)}: spent ${o.spent_mc} mc on its budget, ${o.period_spent} mc in its period`);
    }
    const orphans = db
      .query(`SELECT count(*) AS n FROM receipts r WHERE r.outcome = 'charged' AND NOT EXISTS (SELECT 1 FROM keys k WHERE k.id = r.key_id)`)
      .get() as { n: number };
    if (orphans.n > 0) problems.push(`${orphans.n} charged receipts belong to no key`);
    // Pruned reservations count in the summary their transaction folded them into.
    const settled = db
      .query("SELECT (SELECT count(*) FROM reservations WHERE state = 'settled') + (SELECT coalesce(sum(settled), 0) FROM settled_pruned) AS n")
      .get() as { n: number };
    const settledReceipts = db
      .query("SELECT count(*) AS n FROM receipts WHERE outcome NOT IN ('refused_not_allowed', 'refused_budget', 'refused_org_budget')")
      .get() as {
      n: number;
    };
    if (settled.n !== settledReceipts.n) {
      problems.push(`${settled.n} settled reservations but ${settledReceipts.n} receipts of settled calls`);
    }
    return problems;
  }

  async *receiptsInChainOrder(pageSize: number): AsyncGenerator<StoredReceiptRecord[]> {
    // Keyset pages on the (key_id, seq) index: each page starts where the last ended.
    const first = this.sql.db.query("SELECT * FROM receipts ORDER BY key_id, seq LIMIT $limit");
    const next = this.sql.db.query("SELECT * FROM receipts WHERE (key_id, seq) > ($key, $seq) ORDER BY key_id, seq LIMIT $limit");
    let rows = first.all({ $limit: pageSize }) as ReceiptRow[];
    while (rows.length > 0) {
      yield rows.map(storedReceiptOf);
      const last = rows[rows.length - 1]!;
      rows = next.all({ $key: last.key_id, $seq: last.seq, $limit: pageSize }) as ReceiptRow[];
    }
  }

  async *keptAudit(pageSize: number): AsyncGenerator<KeptAuditRow[]> {
    // Keyset pages by id: the rows that name a receipt are those migration 12 kept.
    const page = this.sql.db.query(
      `SELECT a.id, a.at, a.org_id, a.key_id, a.tool, a.outcome, a.http_status, a.price_mc, a.upstream_cost_mc, a.margin_mc, a.receipt_id,
         r.payload, r.issued_at AS receipt_issued_at
       FROM audit a LEFT JOIN receipts r ON r.id = a.receipt_id
       WHERE a.receipt_id IS NOT NULL AND a.id > $after ORDER BY a.id LIMIT $limit`,
    );
    for (let after = 0; ; ) {
      const rows = page.all({ $after: after, $limit: pageSize }) as (AuditRow & { id: number; payload: string | null; receipt_issued_at: number | null })[];
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.id;
      yield rows.map((r) => ({ entry: auditOf(r), receipt: r.payload === null ? null : { payload: r.payload, issuedAt: r.receipt_issued_at! } }));
    }
  }
}
