// The money invariants of `desk check`, as PostgreSQL queries: what is wrong, as lines (empty
// when the ledger is sound). The signature and chain checks over the receipts are the domain's
// (they read receiptsInChainOrder); this adds the one thing SQLite does not have, the chain head kept
// on each key row. Organization budgets are checked as keys are: each org period's spend is its
// charged and open reservations, its counted charges its charges, the org row its period's.
// Settled reservations pruned in housekeeping count through settled_pruned, the summary their
// deleting statement wrote.
import type { SQL } from "bun";
import type { LedgerCheck } from "../../core/desk/ports.ts";
import type { KeptAuditRow, StoredReceiptRecord } from "../../core/desk/records.ts";
import { printable } from "../../core/receipt/printable.ts";
import type { Db } from "./db.ts";
import { toSafe } from "./money.ts";
import { type AuditRow, auditOf, RECEIPT_COLUMNS, type ReceiptRow, storedReceiptOf } from "./rows.ts";

export async function checkMoney(sql: SQL): Promise<string[]> {
  const problems: string[] = [];
  const periods = await sql`
    SELECT s.key_id, s.period, s.spent_mc, s.charged_mc AS counted_charges,
           coalesce((SELECT sum(amount_mc) FROM receipts r WHERE r.key_id = s.key_id AND r.period = s.period AND r.outcome = 'charged'), 0) AS charged,
           coalesce((SELECT sum(price_mc) FROM reservations v WHERE v.key_id = s.key_id AND v.period = s.period AND v.state = 'open'), 0) AS open
      FROM spend s ORDER BY s.key_id, s.period`;
  for (const r of periods) {
    const [spent, charged, open] = [toSafe(r.spent_mc), toSafe(r.charged), toSafe(r.open)];
    if (toSafe(r.counted_charges) !== charged) {
      problems.push(`key ${printable(r.key_id)} period ${printable(r.period)}: ${r.counted_charges} mc counted as charged, but charges ${charged}`);
    }
    if (spent !== charged + open) {
      problems.push(`key ${printable(r.key_id)} period ${printable(r.period)}: spent ${spent} mc, but charges ${charged} + open reservations ${open}`);
    }
  }
  const keys = await sql`
    SELECT k.id, k.spent_mc, coalesce(s.spent_mc, 0) AS period_spent, k.receipt_seq, k.receipt_head_sha256,
           (SELECT max(seq) FROM receipts r WHERE r.key_id = k.id) AS last_seq,
           (SELECT encode(sha256(convert_to(payload, 'UTF8')), 'hex') FROM receipts r WHERE r.key_id = k.id ORDER BY seq DESC LIMIT 1) AS last_sha256
      FROM keys k LEFT JOIN spend s ON s.key_id = k.id AND s.period = k.period ORDER BY k.id`;
  for (const k of keys) {
    if (toSafe(k.spent_mc) !== toSafe(k.period_spent))
      problems.push(`key ${printable(k.id)}: spent ${k.spent_mc} mc on the key, ${k.period_spent} mc in its period`);
    if (toSafe(k.receipt_seq) !== toSafe(k.last_seq ?? 0n) || k.receipt_head_sha256 !== k.last_sha256) {
      problems.push(`key ${printable(k.id)}: chain head seq ${k.receipt_seq} does not match its last receipt (seq ${k.last_seq ?? 0})`);
    }
  }
  const orgPeriods = await sql`
    SELECT s.org_id, s.period, s.spent_mc, s.charged_mc AS counted_charges,
           coalesce((SELECT sum(price_mc) FROM reservations v WHERE v.org_id = s.org_id AND v.org_period = s.period AND v.outcome = 'charged'), 0)
             + coalesce((SELECT sum(charged_mc) FROM settled_pruned p WHERE p.org_id = s.org_id AND p.org_period = s.period), 0) AS charged,
           coalesce((SELECT sum(price_mc) FROM reservations v WHERE v.org_id = s.org_id AND v.org_period = s.period
             AND (v.state = 'open' OR v.outcome = 'charged')), 0)
             + coalesce((SELECT sum(charged_mc) FROM settled_pruned p WHERE p.org_id = s.org_id AND p.org_period = s.period), 0) AS counted
      FROM org_spend s ORDER BY s.org_id, s.period`;
  for (const r of orgPeriods) {
    const [spent, charged, counted] = [toSafe(r.spent_mc), toSafe(r.charged), toSafe(r.counted)];
    if (toSafe(r.counted_charges) !== charged) {
      problems.push(`org ${printable(r.org_id)} period ${printable(r.period)}: ${r.counted_charges} mc counted as charged, but charges ${charged}`);
    }
    if (spent !== counted)
      problems.push(`org ${printable(r.org_id)} period ${printable(r.period)}: spent ${spent} mc, but charges and open reservations ${counted}`);
  }
  const orgs = await sql`
    SELECT o.org_id, o.spent_mc, coalesce(s.spent_mc, 0) AS period_spent
      FROM org_budgets o LEFT JOIN org_spend s ON s.org_id = o.org_id AND s.period = o.period ORDER BY o.org_id`;
  for (const o of orgs) {
    if (toSafe(o.spent_mc) !== toSafe(o.period_spent))
      problems.push(`org ${printable(o.org_id)}: spent ${o.spent_mc} mc on its budget, ${o.period_spent} mc in its period`);
  }
  const [orphans] = await sql`SELECT count(*) AS n FROM receipts r WHERE r.outcome = 'charged' AND NOT EXISTS (SELECT 1 FROM keys k WHERE k.id = r.key_id)`;
  if (toSafe(orphans.n) > 0) problems.push(`${orphans.n} charged receipts belong to no key`);
  const [counts] = await sql`
    SELECT (SELECT count(*) FROM reservations WHERE state = 'settled') + (SELECT coalesce(sum(settled), 0) FROM settled_pruned) AS settled,
           (SELECT count(*) FROM receipts WHERE outcome NOT IN ('refused_not_allowed', 'refused_budget', 'refused_org_budget')) AS receipts`;
  if (toSafe(counts.settled) !== toSafe(counts.receipts))
    problems.push(`${counts.settled} settled reservations but ${counts.receipts} receipts of settled calls`);
  return problems;
}

/** The port's view of the checks: the money invariants above, and every receipt by key in chain order. */
export class PostgresCheck implements LedgerCheck {
  constructor(private readonly db: Db) {}

  money(): Promise<string[]> {
    return this.db.run(checkMoney);
  }

  async *receiptsInChainOrder(pageSize: number): AsyncGenerator<StoredReceiptRecord[]> {
    // Keyset pages on the (key_id, seq) unique index: each page starts where the last ended.
    let rows = (await this.db.run((sql) => sql.unsafe(`SELECT ${RECEIPT_COLUMNS} FROM receipts ORDER BY key_id, seq LIMIT $1`, [pageSize]))) as ReceiptRow[];
    while (rows.length > 0) {
      yield rows.map(storedReceiptOf);
      const last = rows[rows.length - 1]!;
      rows = (await this.db.run((sql) =>
        sql.unsafe(`SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE (key_id, seq) > ($1, $2) ORDER BY key_id, seq LIMIT $3`, [last.key_id, last.seq, pageSize]),
      )) as ReceiptRow[];
    }
  }

  async *keptAudit(pageSize: number): AsyncGenerator<KeptAuditRow[]> {
    // Keyset pages by id: the rows that name a receipt are those migration 8 kept.
    for (let after = 0n; ; ) {
      const rows = (await this.db.run((sql) =>
        sql.unsafe(
          `SELECT a.id, a.at, a.org_id, a.key_id, a.tool, a.outcome, a.http_status, a.price_mc, a.upstream_cost_mc, a.margin_mc, a.receipt_id,
                  r.payload, r.issued_at AS receipt_issued_at
             FROM audit a LEFT JOIN receipts r ON r.id = a.receipt_id
            WHERE a.receipt_id IS NOT NULL AND a.id > $1::bigint ORDER BY a.id LIMIT $2::integer`,
          [after, pageSize],
        ),
      )) as (AuditRow & { id: bigint; payload: string | null; receipt_issued_at: bigint | null })[];
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.id;
      yield rows.map((r) => ({
        entry: auditOf(r),
        receipt: r.payload === null ? null : { payload: r.payload, issuedAt: toSafe(r.receipt_issued_at) },
      }));
    }
  }
}
