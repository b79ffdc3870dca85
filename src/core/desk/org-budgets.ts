// Organization budgets as the operator manages them (SPEC 8.16): every key of an org draws on the
// org's budget as well as its own. Each change of the budget (setting it, a top-up) is a signed
// record in the org's chain, written in the transaction that changes it.
import { WireError } from "../errors.ts";
import type { DeskContext } from "./context.ts";
import { periodOf, type Reset } from "./period.ts";
import type { OrgBudget, StoredOrgRecord } from "./records.ts";

/** An org budget as it stands in its period at `now`; `budgetMc` null is unlimited. */
export type OrgBudgetNow = { budgetMc: number | null; reset: Reset; period: string; spentMc: number; remainingMc: number | null };

export function orgBudgetAt(b: OrgBudget, now: number): OrgBudgetNow {
  const atNow = periodOf(b.reset, now);
  // Still the row's period (or a clock stepping back behind it, which the ledger refuses): its spend; a later one has spent nothing yet.
  const [period, spentMc] = atNow <= b.period ? [b.period, b.spentMc] : [atNow, 0];
  return { budgetMc: b.budgetMc, reset: b.reset, period, spentMc, remainingMc: b.budgetMc === null ? null : Math.max(0, b.budgetMc - spentMc) };
}

/** ORG_UNKNOWN, else the org's budget now (null: it never had one, so it is unlimited). */
export async function orgBudget(d: DeskContext, orgId: string): Promise<OrgBudgetNow | null> {
  if ((await d.ledger.orgs.get(orgId)) === null) throw new WireError("ORG_UNKNOWN");
  const b = await d.ledger.finance.budget(orgId);
  return b === null ? null : orgBudgetAt(b, d.now());
}

/**
 * Sets the org's budget (null: unlimited). ORG_UNKNOWN; FIELD_MISSING (reset) for an org's first
 * budget without one; VALUE_INVALID (reset) for another reset than the first budget fixed;
 * VALUE_INVALID (budget_mc) below what the org's period already spent.
 */
export async function setOrgBudget(
  d: DeskContext,
  orgId: string,
  budgetMc: number | null,
  reset: Reset | null,
): Promise<{ budget: OrgBudgetNow; record: StoredOrgRecord | null }> {
  const now = d.now();
  const r = await d.ledger.finance.setBudget({ orgId, budgetMc, reset, now }, d.signing.recordMaker());
  switch (r.kind) {
    case "missing":
      throw new WireError("ORG_UNKNOWN");
    case "reset_needed":
      throw new WireError("FIELD_MISSING", { field: "reset" });
    case "reset_fixed":
      throw new WireError("VALUE_INVALID", { field: "reset" });
    case "over_budget":
      throw new WireError("VALUE_INVALID", { field: "budget_mc" });
    case "set":
      return { budget: orgBudgetAt(r.budget, now), record: r.record };
  }
}

/**
 * Adds `amountMc` to the org's budget, once per `reference`: the same reference and amount again
 * answers the first top-up's record (`added` false). ORG_UNKNOWN; TOPUP_CONFLICT for another
 * amount under a used reference, or an org without a budget to add to; VALUE_INVALID (amount_mc)
 * for a budget past 2^53 - 1.
 */
export async function topUp(
  d: DeskContext,
  orgId: string,
  amountMc: number,
  reference: string,
): Promise<{ added: boolean; record: StoredOrgRecord; budget: OrgBudgetNow }> {
  const now = d.now();
  const r = await d.ledger.finance.topUp({ orgId, amountMc, reference, now }, d.signing.recordMaker());
  switch (r.kind) {
    case "missing":
      throw new WireError("ORG_UNKNOWN");
    case "unlimited":
    case "conflict":
      throw new WireError("TOPUP_CONFLICT");
    case "too_large":
      throw new WireError("VALUE_INVALID", { field: "amount_mc" });
    case "added":
    case "existing":
      return { added: r.kind === "added", record: r.record, budget: orgBudgetAt(r.budget, now) };
  }
}

/** ORG_UNKNOWN, else the org's alert thresholds. */
export async function orgThresholds(d: DeskContext, orgId: string): Promise<readonly number[]> {
  return (await d.ledger.finance.thresholds(orgId)) ?? wireOrgUnknown();
}

/** ORG_UNKNOWN unless the org exists; its thresholds are then `thresholds`. */
export async function setOrgThresholds(d: DeskContext, orgId: string, thresholds: readonly number[]): Promise<void> {
  if (!(await d.ledger.finance.setThresholds(orgId, thresholds))) wireOrgUnknown();
}

function wireOrgUnknown(): never {
  throw new WireError("ORG_UNKNOWN");
}

/** ORG_UNKNOWN, else the org's budget records in chain order. */
export async function orgRecords(d: DeskContext, orgId: string): Promise<StoredOrgRecord[]> {
  if ((await d.ledger.orgs.get(orgId)) === null) throw new WireError("ORG_UNKNOWN");
  return d.ledger.finance.records(orgId);
}
