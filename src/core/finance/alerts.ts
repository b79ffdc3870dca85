// Budget alerts: which thresholds an outcome crossed, and the event the desk delivers for each.
// Pure. The rule "one alert per threshold per period" is the ledger's: a unique row
// (scope, subject, period, threshold_pct, budget_mc) written in the charge's own transaction,
// so concurrency and restarts cannot make a second one (docs/finance.md).
import { canonicalJson } from "../receipt/canonical.ts";

/** Percent of the period's budget; the desk's default for keys and orgs alike. */
export const DEFAULT_THRESHOLDS: readonly number[] = [80, 100];
export const MAX_THRESHOLDS = 10;

/** Null when `value` is a threshold list (0-10 distinct integers 1-100), else what is wrong. */
export function thresholdsProblem(value: unknown): string | null {
  if (!Array.isArray(value)) return "alert_thresholds must be a list of percentages";
  if (value.length > MAX_THRESHOLDS) return `alert_thresholds holds at most ${MAX_THRESHOLDS} percentages`;
  if (!value.every((p) => Number.isInteger(p) && p >= 1 && p <= 100)) return "each alert threshold is an integer percentage from 1 to 100";
  if (new Set(value).size !== value.length) return "alert_thresholds repeats a percentage";
  return null;
}

/** The thresholds in ascending order (the order alerts are written and delivered). */
export const sortedThresholds = (list: readonly number[]): number[] => [...list].sort((a, b) => a - b);

/**
 * The spend at which `pct` percent of `budgetMc` is reached: ceil(budget × pct / 100), exact
 * (in bigint: budget × 100 can pass 2^53). 80 % of 1,001 mc is reached at 801 mc.
 */
export function thresholdMc(budgetMc: number, pct: number): number {
  return Number((BigInt(budgetMc) * BigInt(pct) + 99n) / 100n);
}

export type Crossing = { threshold_pct: number; threshold_mc: number };

/**
 * The thresholds a charge crossed: those whose spend mark lies in (before, after]. A price of 0,
 * a refund or an unlimited budget (null) crosses none; a budget of 0 crosses none (nothing can be
 * spent from it but price-0 calls).
 */
export function crossedByCharge(budgetMc: number | null, spentBeforeMc: number, spentAfterMc: number, thresholds: readonly number[]): Crossing[] {
  if (budgetMc === null || spentAfterMc <= spentBeforeMc) return [];
  const out: Crossing[] = [];
  for (const pct of sortedThresholds(thresholds)) {
    const mark = thresholdMc(budgetMc, pct);
    if (spentBeforeMc < mark && mark <= spentAfterMc) out.push({ threshold_pct: pct, threshold_mc: mark });
  }
  return out;
}

/**
 * The thresholds a budget refusal reached: the key (or org) cannot pay this price, so for its
 * alerts it is as spent as its budget: every mark in (spent, budget] is reached. Without this
 * the 100 % alert would almost never fire, as prices rarely fill a budget to the millicent.
 */
export function reachedByRefusal(budgetMc: number | null, spentMc: number, thresholds: readonly number[]): Crossing[] {
  return budgetMc === null ? [] : crossedByCharge(budgetMc, spentMc, Math.max(spentMc, budgetMc), thresholds);
}

export const ALERT_EVENT_TYPE = "budget.threshold_crossed";
export const ALERT_EVENT_VERSION = 1;

export type AlertData = {
  v: 1;
  /** `alrt_…`: also the `webhook-id` of every attempt, so receivers dedupe on it. */
  alert_id: string;
  /** Whose budget: the key's own, or its organization's. */
  scope: "key" | "org";
  org_id: string;
  /** The key whose call crossed the threshold (for scope "org" too). */
  key_id: string;
  /** The budget period of the scope: "none", "YYYY-MM" or "YYYY-MM-DD". */
  period: string;
  threshold_pct: number;
  threshold_mc: number;
  budget_mc: number;
  /** The scope's spend in the period after the outcome (for a refusal: unchanged). */
  spent_mc: number;
  remaining_mc: number;
  /** "charge": a charge crossed the mark; "refusal": a call was refused for want of budget. */
  cause: "charge" | "refusal";
  tool: string;
  receipt_id: string;
};

/** The Standard Webhooks payload shape: type, timestamp (the outcome's issued_at), data. */
export type AlertEvent = { type: typeof ALERT_EVENT_TYPE; timestamp: string; data: AlertData };

export type AlertFacts = Omit<AlertData, "v" | "threshold_pct" | "threshold_mc" | "remaining_mc"> & { crossing: Crossing; at: string };

/** The event for one crossing. Ids and amounts only: no secret, no argument, no answer. */
export function alertEvent(f: AlertFacts): AlertEvent {
  const { crossing, at, ...rest } = f;
  return {
    type: ALERT_EVENT_TYPE,
    timestamp: at,
    data: {
      v: ALERT_EVENT_VERSION,
      alert_id: rest.alert_id,
      scope: rest.scope,
      org_id: rest.org_id,
      key_id: rest.key_id,
      period: rest.period,
      threshold_pct: crossing.threshold_pct,
      threshold_mc: crossing.threshold_mc,
      budget_mc: rest.budget_mc,
      spent_mc: rest.spent_mc,
      remaining_mc: Math.max(0, rest.budget_mc - rest.spent_mc),
      cause: rest.cause,
      tool: rest.tool,
      receipt_id: rest.receipt_id,
    },
  };
}

/**
 * The body the outbox stores and every attempt sends, byte for byte: RFC 8785 canonical JSON,
 * so the signed bytes never depend on a serialiser.
 */
export const alertBody = (event: AlertEvent): string => canonicalJson(event);

/** Every field of AlertData, in the order alertEvent writes them. */
export const ALERT_DATA_FIELDS = [
  "v",
  "alert_id",
  "scope",
  "org_id",
  "key_id",
  "period",
  "threshold_pct",
  "threshold_mc",
  "budget_mc",
  "spent_mc",
  "remaining_mc",
  "cause",
  "tool",
  "receipt_id",
] as const satisfies readonly (keyof AlertData)[];
const DATA_FIELDS: readonly string[] = ALERT_DATA_FIELDS;
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const PERIOD = /^(none|\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)$/;
const isText = (v: unknown) => typeof v === "string" && v.length > 0 && v.length <= 200;
const isMoney = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

/** A receiver's strict reading of a v1 alert body: null when it is one, else the first problem. */
export function alertEventProblem(value: unknown): string | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not an object";
  const e = value as Record<string, unknown>;
  const top = Object.keys(e).sort().join(",");
  if (top !== "data,timestamp,type") return "the event holds exactly type, timestamp and data";
  if (e.type !== ALERT_EVENT_TYPE) return `type is not ${ALERT_EVENT_TYPE}`;
  if (typeof e.timestamp !== "string" || !ISO_MS.test(e.timestamp)) return "timestamp is not RFC 3339 UTC with milliseconds";
  const d = e.data as Record<string, unknown>;
  if (typeof d !== "object" || d === null || Array.isArray(d)) return "data is not an object";
  for (const key of Object.keys(d)) if (!DATA_FIELDS.includes(key)) return `data.${key}: unknown field`;
  for (const key of DATA_FIELDS) if (!Object.hasOwn(d, key)) return `data.${key}: missing`;
  if (d.v !== ALERT_EVENT_VERSION) return "data.v is not 1";
  for (const key of ["alert_id", "org_id", "key_id", "tool", "receipt_id"]) if (!isText(d[key])) return `data.${key}: not a string of 1-200 characters`;
  if (d.scope !== "key" && d.scope !== "org") return "data.scope is not key or org";
  if (d.cause !== "charge" && d.cause !== "refusal") return "data.cause is not charge or refusal";
  if (typeof d.period !== "string" || !PERIOD.test(d.period)) return "data.period is not none, YYYY-MM or YYYY-MM-DD";
  if (!Number.isInteger(d.threshold_pct) || (d.threshold_pct as number) < 1 || (d.threshold_pct as number) > 100) return "data.threshold_pct is not 1-100";
  for (const key of ["threshold_mc", "budget_mc", "spent_mc", "remaining_mc"]) if (!isMoney(d[key])) return `data.${key}: not a safe integer >= 0`;
  if (d.threshold_mc !== thresholdMc(d.budget_mc as number, d.threshold_pct as number)) return "data.threshold_mc is not ceil(budget_mc × threshold_pct / 100)";
  if (d.remaining_mc !== Math.max(0, (d.budget_mc as number) - (d.spent_mc as number))) return "data.remaining_mc is not budget_mc − spent_mc";
  return null;
}

/** An outcome as one budget scope (a key, or its org) saw it, in the transaction that wrote it. */
export type ScopeOutcome = {
  scope: "key" | "org";
  /** The key's or the org's id. */
  subjectId: string;
  orgId: string;
  keyId: string;
  /** The scope's budget period the outcome belongs to. */
  period: string;
  /** null: unlimited (no alert). */
  budgetMc: number | null;
  thresholds: readonly number[];
  /** The scope's settled charges in `period` before the outcome (the same after a refusal). */
  chargedBeforeMc: number;
  chargedAfterMc: number;
  cause: "charge" | "refusal";
  tool: string;
  receiptId: string;
  /** The receipt's issued_at, milliseconds. */
  at: number;
};

/** An alert row to write, unique on (scope, subjectId, period, thresholdPct, budgetMc). */
export type NewAlert = {
  id: string;
  scope: "key" | "org";
  subjectId: string;
  orgId: string;
  keyId: string;
  period: string;
  thresholdPct: number;
  budgetMc: number;
  body: string;
  createdAt: number;
};

/**
 * The alerts an outcome raises: a charge, each mark it crossed; a refusal for want of budget,
 * each mark it reached (reachedByRefusal). The ledger writes them in the outcome's transaction
 * and skips any whose unique key is taken: one alert per threshold per period and budget.
 */
export function alertsOf(o: ScopeOutcome, newAlertId: () => string): NewAlert[] {
  if (o.budgetMc === null) return [];
  const budget = o.budgetMc;
  const crossings =
    o.cause === "charge"
      ? crossedByCharge(budget, o.chargedBeforeMc, o.chargedAfterMc, o.thresholds)
      : reachedByRefusal(budget, o.chargedBeforeMc, o.thresholds);
  const at = new Date(o.at).toISOString();
  return crossings.map((crossing) => {
    const id = newAlertId();
    const event = alertEvent({
      alert_id: id,
      scope: o.scope,
      org_id: o.orgId,
      key_id: o.keyId,
      period: o.period,
      budget_mc: budget,
      spent_mc: o.chargedAfterMc,
      cause: o.cause,
      tool: o.tool,
      receipt_id: o.receiptId,
      crossing,
      at,
    });
    return {
      id,
      scope: o.scope,
      subjectId: o.subjectId,
      orgId: o.orgId,
      keyId: o.keyId,
      period: o.period,
      thresholdPct: crossing.threshold_pct,
      budgetMc: budget,
      body: alertBody(event),
      createdAt: o.at,
    };
  });
}
