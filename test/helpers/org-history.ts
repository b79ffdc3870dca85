// Signed histories of one organization for the statement tests: receipts (each key's chain) and
// budget records (the org's chain), signed with a real receipt key, in time order.
import type { StatementReceipt, StatementRecord } from "../../src/core/finance/statement.ts";
import { type OrgRecord, type OrgRecordEnvelope, recordLinkAfter, signOrgRecord } from "../../src/core/finance/org-records.ts";
import { periodOf, type Reset } from "../../src/core/desk/period.ts";
import { chainLinkAfter, type Envelope, type Outcome, type Receipt, type ReceiptSigner, sha256Hex } from "../../src/core/receipt/index.ts";

export type ReceiptEvent = { kind: "receipt"; key: string; at: string; outcome: Outcome; tool: string; price: number; upstream: number; amount?: number };
export type RecordEvent = { kind: "record"; at: string } & (
  | { type: "topup"; amount: number; reference?: string }
  | { type: "budget_set"; budget: number | null }
);
export type HistoryEvent = ReceiptEvent | RecordEvent;

export type OrgHistory = {
  orgId: string;
  envelopes: Envelope[];
  receipts: StatementReceipt[];
  records: StatementRecord[];
};

const HTTP: Record<Outcome, number> = {
  charged: 200,
  refused_not_allowed: 403,
  refused_budget: 402,
  refused_org_budget: 402,
  refunded_upstream_error: 502,
  refunded_timeout: 504,
  refunded_args_refused: 400,
  refunded_abandoned: 504,
};

/** Signs `events` (in the order given) as the desk would: one chain per key, one for the org. */
export function orgHistory(signer: ReceiptSigner, orgId: string, reset: Reset, keyResets: Record<string, Reset>, events: readonly HistoryEvent[]): OrgHistory {
  const lastReceipt = new Map<string, Receipt>();
  let lastRecord: OrgRecord | null = null;
  const out: OrgHistory = { orgId, envelopes: [], receipts: [], records: [] };
  let n = 0;
  for (const e of events) {
    n++;
    if (e.kind === "receipt") {
      const link = chainLinkAfter(lastReceipt.get(e.key) ?? null);
      const charged = e.outcome === "charged";
      const envelope = signer.sign({
        id: `rcpt_${String(n).padStart(16, "0")}`,
        issued_at: e.at,
        org_id: orgId,
        key_id: e.key,
        tool: e.tool,
        outcome: e.outcome,
        http_status: HTTP[e.outcome],
        price_mc: e.price,
        amount_mc: charged ? (e.amount ?? e.price) : 0,
        upstream_cost_mc: e.upstream,
        remaining_mc: 0,
        period: periodOf(keyResets[e.key] ?? "none", Date.parse(e.at)),
        params_sha256: sha256Hex(`params ${n}`),
        result_sha256: charged ? sha256Hex(`result ${n}`) : null,
        seq: link.seq,
        prev_sha256: link.prev_sha256,
      });
      lastReceipt.set(e.key, envelope.receipt);
      out.envelopes.push(envelope);
      out.receipts.push({ receipt: envelope.receipt, payloadSha256: sha256Hex(Buffer.from(envelope.payload, "base64url")) });
    } else {
      const link = recordLinkAfter(lastRecord);
      const previousBudget: number | null = lastRecord === null ? null : lastRecord.budget_mc;
      const common = { id: `orec_${String(n).padStart(16, "0")}`, issued_at: e.at, org_id: orgId, reset, ...link };
      const envelope: OrgRecordEnvelope =
        e.type === "topup"
          ? signOrgRecord(signer, {
              ...common,
              type: "topup",
              amount_mc: e.amount,
              budget_mc: (previousBudget ?? 0) + e.amount,
              reference: e.reference ?? `ref-${n}`,
            })
          : signOrgRecord(signer, { ...common, type: "budget_set", amount_mc: 0, budget_mc: e.budget, reference: null });
      lastRecord = envelope.record;
      out.records.push({ envelope, record: envelope.record });
    }
  }
  return out;
}

/** The export a desk hands out: one envelope per line, parsed back as a reader would. */
export const exportLines = (envelopes: readonly Envelope[]): unknown[] => envelopes.map((e) => JSON.parse(JSON.stringify(e)));
