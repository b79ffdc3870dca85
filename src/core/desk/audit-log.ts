// The audit log as GET /admin/audit answers it (SPEC 8.8): one entry per recorded call. A call
// with a receipt is read out of its signed receipt, so the ledger stores its facts once; the
// audit table keeps the calls without one (and rows migration 12 kept because they said other
// than their receipt). Both ledgers answer through these functions, so the two cannot drift.
import type { Receipt } from "../receipt/index.ts";
import { printable } from "../receipt/printable.ts";
import type { PlainOutcome, ReceiptOutcome } from "./outcomes.ts";
import type { AuditEntry, KeptAuditRow } from "./records.ts";

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

/** The columns a kept row is compared on with what its receipt derives, by their wire names. */
const COMPARED: [keyof AuditEntry, string][] = [
  ["orgId", "org_id"],
  ["keyId", "key_id"],
  ["tool", "tool"],
  ["outcome", "outcome"],
  ["httpStatus", "http_status"],
  ["priceMc", "price_mc"],
  ["upstreamCostMc", "upstream_cost_mc"],
  ["marginMc", "margin_mc"],
];

const shown = (v: unknown) => (typeof v === "string" ? printable(JSON.stringify(v)) : String(v));

/**
 * What desk check says of an audit row kept beside its receipt: null when it says what the
 * receipt derives, but for an `at` at or before the receipt's issue time (a row written beside
 * its receipt stamped the call's time, the receipt the later moment it was signed); otherwise each
 * column that differs. A kept row is answered as it is, so one that disagrees with what was
 * signed is named rather than hidden.
 */
export function keptAuditProblem({ entry, receipt }: KeptAuditRow): string | null {
  const name = `audit row of receipt ${printable(entry.receiptId ?? "")}`;
  if (receipt === null) return `${name}: no such receipt`;
  const derived = auditOfReceipt(receipt.payload, receipt.issuedAt);
  const differs = COMPARED.filter(([field]) => entry[field] !== derived[field]).map(
    ([field, wire]) => `${wire} ${shown(entry[field])}, its receipt derives ${shown(derived[field])}`,
  );
  if (entry.at > receipt.issuedAt)
    differs.unshift(`at ${new Date(entry.at).toISOString()}, after its receipt was issued at ${new Date(receipt.issuedAt).toISOString()}`);
  return differs.length === 0 ? null : `${name}: ${differs.join("; ")}`;
}
