// An organization's signed statement (version 1) for a month (`YYYY-MM`) or a UTC day
// (`YYYY-MM-DD`): balances, top-ups, charges, refunds and margin per tool, computed from the
// org's receipts and budget records alone, so a third party holding the receipts export and the
// desk's JWKS recomputes every figure (statement-verify.ts). Pure: the same function runs on the
// desk, over its ledger, and in the verifier, over the export; docs/finance.md states the rules.
import type { ReceiptSigner } from "../receipt/sign.ts";
import type { Receipt } from "../receipt/types.ts";
import { printable } from "../receipt/verify.ts";
import { isArkErrors, schemas } from "../schema/ark.ts";
import { financeFields, type OrgRecord, type OrgRecordEnvelope } from "./org-records.ts";
import { type SignedDocument, signDocument } from "./signed-document.ts";

export const STATEMENT_VERSION = 1;

export type StatementPeriod = { period: string; kind: "month" | "day"; start: string; end: string };

const iso = (ms: number) => new Date(ms).toISOString();

/** `YYYY-MM` or `YYYY-MM-DD` (a real UTC date), with its start and end (exclusive), or null. */
export function parseStatementPeriod(text: string): StatementPeriod | null {
  const m = /^(\d{4})-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?$/.exec(text);
  if (!m) return null;
  const year = Number(m[1]);
  const month = Number(m[2]) - 1;
  if (m[3] === undefined) return { period: text, kind: "month", start: iso(Date.UTC(year, month, 1)), end: iso(Date.UTC(year, month + 1, 1)) };
  const day = Number(m[3]);
  const startMs = Date.UTC(year, month, day);
  if (new Date(startMs).getUTCDate() !== day) return null;
  return { period: text, kind: "day", start: iso(startMs), end: iso(startMs + 86_400_000) };
}

const statementSchema = schemas(({ type }) => {
  const { count, hex64, isoMs, money, signedMoney, text200 } = financeFields();
  const tally = type({ "+": "reject", count, amount_mc: money });
  const first = type({ "+": "reject", id: text200, issued_at: isoMs }).or("null");
  const ToolLine = type({
    "+": "reject",
    tool: text200,
    calls: count,
    charged_calls: count,
    charged_mc: money,
    upstream_cost_mc: money,
    margin_mc: signedMoney,
    refunded_calls: count,
    refunded_price_mc: money,
    refused_calls: count,
  });
  const ChainHead = type({ "+": "reject", key_id: text200, seq: money.narrow((n, ctx) => n >= 1 || ctx.mustBe("at least 1")), sha256: hex64 });
  const EmbeddedRecord = type({ "+": "reject", payload: "string", signature: "string", kid: "string", record: "object" });

  return type({
    "+": "reject",
    v: "1",
    type: "'statement'",
    id: text200,
    kid: text200,
    issued_at: isoMs,
    org_id: text200,
    period: "string",
    period_start: isoMs,
    period_end: isoMs,
    covers_until: isoMs,
    closed: "boolean",
    reset: "'none' | 'daily' | 'monthly' | null",
    opening_budget_mc: money.or("null"),
    closing_budget_mc: money.or("null"),
    opening_balance_mc: signedMoney.or("null"),
    closing_balance_mc: signedMoney.or("null"),
    topups: tally,
    budget_changes: { "+": "reject", count, raised_mc: money, lowered_mc: money },
    charges: { "+": "reject", calls: count, amount_mc: money, upstream_cost_mc: money, margin_mc: signedMoney },
    refunds: { "+": "reject", calls: count, price_mc: money },
    refusals: { "+": "reject", calls: count },
    tools: ToolLine.array(),
    receipts: { "+": "reject", count, first, last: first },
    chains: ChainHead.array(),
    records: EmbeddedRecord.array(),
  });
});

export type Statement = Omit<ReturnType<typeof statementSchema>["infer"], "records"> & { records: OrgRecordEnvelope[] };
export type StatementFields = Omit<Statement, "v" | "type" | "kid">;
export type StatementEnvelope = SignedDocument<"statement", Statement>;
export type ToolLine = Statement["tools"][number];

/** Null when `value` reads as a v1 statement (embedded records are opened by the verifier), else the first problem. */
export function statementProblem(value: unknown): string | null {
  const out = statementSchema()(value);
  if (isArkErrors(out)) return printable(out.summary.split("\n")[0]!);
  if (parseStatementPeriod(out.period) === null) return "period must be YYYY-MM or YYYY-MM-DD";
  return null;
}

/** A statement the desk cannot make (a bad period, a reset the period does not fit, a sum past 2^53 - 1). */
export class StatementError extends Error {
  override name = "StatementError";
}

export type StatementReceipt = { receipt: Receipt; payloadSha256: string };
export type StatementRecord = { envelope: OrgRecordEnvelope; record: OrgRecord };

export type StatementInput = {
  id: string;
  org_id: string;
  period: string;
  /** RFC 3339 UTC with milliseconds: when the statement is made. */
  issued_at: string;
  /** The org's budget records in seq order (those issued at or after covers_until are left out). */
  records: readonly StatementRecord[];
  /**
   * The org's receipts, any order: every receipt issued before covers_until must be there (the
   * desk passes its ledger's; the verifier the export's), later ones are ignored.
   */
  receipts: Iterable<StatementReceipt>;
};

const isRefund = (o: Receipt["outcome"]) => o.startsWith("refunded_");
const isRefusal = (o: Receipt["outcome"]) => o.startsWith("refused_");

function safe(n: number, what: string): number {
  if (!Number.isSafeInteger(n)) throw new StatementError(`${what} passes 2^53 - 1`);
  return n;
}

/**
 * The statement's figures. The rules (docs/finance.md):
 * - Window: receipts and records with period_start <= issued_at < covers_until, where
 *   covers_until = min(period_end, the statement's issued_at); closed = issued_at >= period_end.
 * - Budget B(t): budget_mc of the org's last record issued before t (null: unlimited).
 * - Charges C[a, b): the amount_mc of charged receipts issued in [a, b).
 * - Balances: opening = B(start) − C[anchor, start), closing = B(covers_until) −
 *   C[anchor, covers_until), where anchor is the start of the org budget's own period (the
 *   beginning of time for reset none): so closing = opening + top-ups + raised − lowered −
 *   charges whenever both are set. A daily budget has daily statements only, so no reset falls
 *   inside a statement.
 * - Refunds: receipts refunded_* (amount_mc 0): counted with the price that was reserved and given
 *   back. Refusals (refused_*) moved nothing and are counted apart.
 * - Margin: charged amount − upstream cost of the charged calls (may be negative).
 */
export function computeStatement(input: StatementInput): StatementFields {
  const p = parseStatementPeriod(input.period);
  if (p === null) throw new StatementError("period must be YYYY-MM or YYYY-MM-DD");
  if (input.issued_at < p.start) throw new StatementError("the period has not begun");
  const closed = input.issued_at >= p.end;
  const coversUntil = closed ? p.end : input.issued_at;

  const records = input.records.filter((r) => r.record.issued_at < coversUntil);
  for (const r of records) if (r.record.org_id !== input.org_id) throw new StatementError("a record of another organization");
  const reset = records.length === 0 ? null : records[records.length - 1]!.record.reset;
  if (reset === "daily" && p.kind === "month") throw new StatementError("a daily budget's statement covers one UTC day (YYYY-MM-DD)");
  const anchor = reset === "monthly" ? `${p.start.slice(0, 7)}-01T00:00:00.000Z` : reset === "daily" ? p.start : "";
  const budgetAt = (t: string): number | null => {
    let budget: number | null = null;
    for (const r of records) if (r.record.issued_at < t) budget = r.record.budget_mc;
    return budget;
  };

  const inWindow = (t: string) => t >= p.start && t < coversUntil;
  const topups = { count: 0, amount_mc: 0 };
  const budgetChanges = { count: 0, raised_mc: 0, lowered_mc: 0 };
  let previousBudget: number | null = null;
  for (const { record: r } of records) {
    if (inWindow(r.issued_at)) {
      if (r.type === "topup") {
        topups.count++;
        topups.amount_mc = safe(topups.amount_mc + r.amount_mc, "top-ups");
      } else {
        budgetChanges.count++;
        if (previousBudget !== null && r.budget_mc !== null) {
          if (r.budget_mc > previousBudget) budgetChanges.raised_mc = safe(budgetChanges.raised_mc + r.budget_mc - previousBudget, "budget raised");
          else budgetChanges.lowered_mc = safe(budgetChanges.lowered_mc + previousBudget - r.budget_mc, "budget lowered");
        }
      }
    }
    previousBudget = r.budget_mc;
  }

  const heads = new Map<string, { seq: number; sha256: string }>();
  const tools = new Map<string, ToolLine>();
  const charges = { calls: 0, amount_mc: 0, upstream_cost_mc: 0, margin_mc: 0 };
  const refunds = { calls: 0, price_mc: 0 };
  const refusals = { calls: 0 };
  let chargedBefore = 0;
  let countInWindow = 0;
  let firstReceipt: { id: string; issued_at: string } | null = null;
  let lastReceipt: { id: string; issued_at: string } | null = null;
  for (const { receipt: r, payloadSha256 } of input.receipts) {
    if (r.org_id !== input.org_id) throw new StatementError("a receipt of another organization");
    if (r.issued_at >= coversUntil) continue;
    const head = heads.get(r.key_id);
    if (head === undefined || r.seq > head.seq) heads.set(r.key_id, { seq: r.seq, sha256: payloadSha256 });
    if (r.issued_at < p.start) {
      if (r.outcome === "charged" && r.issued_at >= anchor) chargedBefore = safe(chargedBefore + r.amount_mc, "charges");
      continue;
    }
    countInWindow++;
    if (firstReceipt === null || r.issued_at < firstReceipt.issued_at || (r.issued_at === firstReceipt.issued_at && r.id < firstReceipt.id))
      firstReceipt = { id: r.id, issued_at: r.issued_at };
    if (lastReceipt === null || r.issued_at > lastReceipt.issued_at || (r.issued_at === lastReceipt.issued_at && r.id > lastReceipt.id))
      lastReceipt = { id: r.id, issued_at: r.issued_at };
    let line = tools.get(r.tool);
    if (line === undefined) {
      line = {
        tool: r.tool,
        calls: 0,
        charged_calls: 0,
        charged_mc: 0,
        upstream_cost_mc: 0,
        margin_mc: 0,
        refunded_calls: 0,
        refunded_price_mc: 0,
        refused_calls: 0,
      };
      tools.set(r.tool, line);
    }
    line.calls++;
    if (r.outcome === "charged") {
      line.charged_calls++;
      line.charged_mc = safe(line.charged_mc + r.amount_mc, "charges");
      line.upstream_cost_mc = safe(line.upstream_cost_mc + r.upstream_cost_mc, "upstream costs");
      line.margin_mc = line.charged_mc - line.upstream_cost_mc;
      charges.calls++;
      charges.amount_mc = safe(charges.amount_mc + r.amount_mc, "charges");
      charges.upstream_cost_mc = safe(charges.upstream_cost_mc + r.upstream_cost_mc, "upstream costs");
      charges.margin_mc = charges.amount_mc - charges.upstream_cost_mc;
    } else if (isRefund(r.outcome)) {
      line.refunded_calls++;
      line.refunded_price_mc = safe(line.refunded_price_mc + r.price_mc, "refunds");
      refunds.calls++;
      refunds.price_mc = safe(refunds.price_mc + r.price_mc, "refunds");
    } else if (isRefusal(r.outcome)) {
      line.refused_calls++;
      refusals.calls++;
    }
  }

  const openingBudget = budgetAt(p.start);
  const closingBudget = budgetAt(coversUntil);
  const byText =
    <T>(key: (x: T) => string) =>
    (a: T, b: T) =>
      key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0;
  return {
    id: input.id,
    issued_at: input.issued_at,
    org_id: input.org_id,
    period: p.period,
    period_start: p.start,
    period_end: p.end,
    covers_until: coversUntil,
    closed,
    reset,
    opening_budget_mc: openingBudget,
    closing_budget_mc: closingBudget,
    opening_balance_mc: openingBudget === null ? null : openingBudget - chargedBefore,
    closing_balance_mc: closingBudget === null ? null : closingBudget - safe(chargedBefore + charges.amount_mc, "charges"),
    topups,
    budget_changes: budgetChanges,
    charges,
    refunds,
    refusals,
    tools: [...tools.values()].sort(byText((t) => t.tool)),
    receipts: { count: countInWindow, first: firstReceipt, last: lastReceipt },
    chains: [...heads].map(([key_id, h]) => ({ key_id, seq: h.seq, sha256: h.sha256 })).sort(byText((c) => c.key_id)),
    records: records.map((r) => r.envelope),
  };
}

/** Signs computed figures as a v1 statement with the receipt key. */
export function signStatement(signer: Pick<ReceiptSigner, "kid" | "signBytes">, fields: StatementFields): StatementEnvelope {
  const { id, ...rest } = fields;
  const statement: Statement = { v: STATEMENT_VERSION, type: "statement", id, kid: signer.kid, ...rest };
  const problem = statementProblem(statement);
  if (problem !== null) throw new StatementError(`refusing to sign an invalid statement: ${problem}`);
  return signDocument(signer, "statement", statement);
}
