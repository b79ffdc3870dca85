// What a call of a paid tool comes to, typed end to end: the receipt outcomes (the receipt's own
// enum), the refusals the audit log records without a receipt, and the answers that reach
// neither. Every status is the error table's (core/errors.ts); no status is written beside a code.
import { ERRORS, type ErrorCode } from "../errors.ts";
import type { ApprovalOutcome, Envelope, Outcome } from "../receipt/types.ts";
import type { ArgsProblem } from "./args.ts";

/** An outcome a signed receipt carries (a denial or an expiry only on a call that waited for a person). */
export type ReceiptOutcome = Outcome | ApprovalOutcome;

/** Refusals recorded in the audit log without a receipt. */
export type PlainOutcome =
  | "refused_rate_limited"
  | "refused_tool_unknown"
  | "refused_args_invalid"
  | "refused_card_number"
  | "refused_approver_unavailable"
  | "refused_approval_unknown"
  | "refused_approval_mismatch"
  | "refused_approval_used";

/**
 * Whether a refusal counts against the key's failure limit (SPEC 8.3). A 429 reached nothing,
 * and counting it would keep the key shut after its calls in flight succeed; an unreachable
 * approver is not the agent's doing; a used approval is an agent repeating a call that went
 * through (20 at once must not close the key).
 */
export function countsAsFailure(outcome: PlainOutcome): boolean {
  return outcome !== "refused_rate_limited" && outcome !== "refused_approver_unavailable" && outcome !== "refused_approval_used";
}

/** Outcomes that settle a reservation (everything a receipt carries but the two refusals before it). */
export type SettleOutcome = Exclude<ReceiptOutcome, "refused_not_allowed" | "refused_budget" | "refused_org_budget">;

/**
 * Answers recorded nowhere: no key was identified, the request itself was refused, the desk
 * failed, or its ledger could not serve; and the answers to a call that waits for a person while
 * nothing has changed (it is pending, or the approver's decision could not be read).
 */
export type UnrecordedOutcome =
  | "refused_key_invalid"
  | "refused_request"
  | "internal_error"
  | "ledger_unavailable"
  | "approval_pending"
  | "refused_approver_bad_answer";

export type ClearingOutcomeName = ReceiptOutcome | PlainOutcome | UnrecordedOutcome;

/** The code each recorded outcome answers with; null for a charge (200). */
const RECORDED_CODE: Record<ReceiptOutcome | PlainOutcome, ErrorCode | null> = {
  charged: null,
  refused_not_allowed: "TOOL_NOT_ALLOWED",
  refused_budget: "BUDGET_EXHAUSTED",
  refused_org_budget: "BUDGET_EXHAUSTED",
  refunded_upstream_error: "UPSTREAM_ERROR",
  refunded_timeout: "UPSTREAM_TIMEOUT",
  refunded_args_refused: "ARGS_REFUSED",
  refunded_abandoned: "UPSTREAM_TIMEOUT",
  refused_rate_limited: "TOO_MANY_FAILURES",
  refused_tool_unknown: "TOOL_UNKNOWN",
  refused_args_invalid: "ARGS_INVALID",
  refunded_denied: "APPROVAL_DENIED",
  refunded_expired: "APPROVAL_EXPIRED",
  refused_card_number: "CARD_NUMBER_REFUSED",
  refused_approver_unavailable: "APPROVER_UNAVAILABLE",
  refused_approval_unknown: "APPROVAL_UNKNOWN",
  refused_approval_mismatch: "APPROVAL_MISMATCH",
  refused_approval_used: "APPROVAL_USED",
};

/** The HTTP status a recorded outcome is answered with (and that its receipt and audit row keep). */
export function statusOf(outcome: ReceiptOutcome | PlainOutcome): number {
  const code = RECORDED_CODE[outcome];
  return code === null ? 200 : ERRORS[code].http;
}

export type ClearingOutcome = {
  /** ERRORS[error].http, or 200 for a charge. */
  status: number;
  outcome: ClearingOutcomeName;
  priceMc: number;
  /** Left in the key's current period; null when no key was identified. */
  remainingMc: number | null;
  error?: ErrorCode;
  problems?: ArgsProblem[];
  result?: Record<string, unknown>;
  receipt?: Envelope;
  /** The approval the call waits for or went through (approval.ts); `expiresAt` when its ask is pending. */
  approval?: { approvalId: string; expiresAt?: number };
};

/** A call that stopped with `code`, its status the table's. */
export function refusal(
  code: ErrorCode,
  outcome: ClearingOutcomeName,
  money: { priceMc: number; remainingMc: number | null },
  extra: { problems?: ArgsProblem[]; receipt?: Envelope; approval?: ClearingOutcome["approval"] } = {},
): ClearingOutcome {
  return { status: ERRORS[code].http, outcome, error: code, priceMc: money.priceMc, remainingMc: money.remainingMc, ...extra };
}

/** A request refused before the clearing path could identify a key (its body, its path) or a fault of the desk. */
export function unrecorded(code: ErrorCode): ClearingOutcome {
  const outcome = code === "INTERNAL" ? "internal_error" : code === "LEDGER_UNAVAILABLE" ? "ledger_unavailable" : "refused_request";
  return refusal(code, outcome, { priceMc: 0, remainingMc: null });
}
