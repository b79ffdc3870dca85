// The audit log as GET /admin/audit answers it (SPEC 8.8): one entry per recorded call. A call
// with a receipt is read out of its signed receipt, so the ledger stores its facts once; the
// audit table keeps the calls without one (and rows migration 12 kept because they said other
// than their receipt). Both ledgers answer through these functions, so the two cannot drift.
import type { Receipt } from "../receipt/index.ts";
import type { PlainOutcome, ReceiptOutcome } from "./outcomes.ts";
import type { AuditEntry } from "./records.ts";

/** A charged call's margin is its price less the upstream's cost; any other call's is 0. */
export function marginOf(outcome: ReceiptOutcome | PlainOutcome, priceMc: number, upstreamCostMc: number): number {
  return outcome === "charged" ? priceMc - upstreamCostMc : 0;
}

/** The audit entry of a receipted call: its canonical payload text, at the receipt's issue time (ms). */
export function auditOfReceipt(payload: string, issuedAt: number): AuditEntry {
  const r = JSON.parse(payload) as Receipt;
  return {
    at: issuedAt,
    orgId: r.org_id,
    keyId: r.key_id,
    tool: r.tool,
    outcome: r.outcome,
    httpStatus: r.http_status,
    priceMc: r.price_mc,
    upstreamCostMc: r.upstream_cost_mc,
    marginMc: marginOf(r.outcome, r.price_mc, r.upstream_cost_mc),
    receiptId: r.id,
  };
}

/**
 * The first `limit` entries of the two lists merged by `at`: the entries read from receipts
 * (in the order the receipts were written) and the audit table's rows (in the order they were
 * written), each already cut to `limit` by its own query. At the same `at`, the receipt's entry
 * comes first. Each list is taken in its own order, so the answer is one fixed order even where
 * a clock stepped back (SPEC 8.8).
 */
export function mergeAudit(fromReceipts: readonly AuditEntry[], fromTable: readonly AuditEntry[], limit: number): AuditEntry[] {
  const out: AuditEntry[] = [];
  let r = 0;
  let t = 0;
  while (out.length < limit && (r < fromReceipts.length || t < fromTable.length)) {
    const next = t >= fromTable.length || (r < fromReceipts.length && fromReceipts[r]!.at <= fromTable[t]!.at) ? fromReceipts[r++]! : fromTable[t++]!;
    out.push(next);
  }
  return out;
}
