// The approver's answers as serve-mcp reads them. Strict: a field the answer should not have
// (a recap, a card, a token) fails the parse, so nothing an approver (or something posing as one)
// adds can reach the agent. Only the fields below, each checked, are ever passed on.
import { ERRORS, type ErrorCode } from "../errors.ts";
import { isApprovalId, isSafeRef } from "../ids.ts";
import { isArkErrors, schemas } from "./ark.ts";

/** RFC 3339 in UTC with a `Z`, as `Date.prototype.toISOString` writes it (fraction optional). */
export const RFC3339_UTC = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?Z$/;

/** The answers, built on first use. */
export const approverAnswers = schemas(({ type }) => {
  const approvalId = type("string").narrow((s, ctx) => isApprovalId(s) || ctx.mustBe("an approval id"));
  const expiresAt = type("string").narrow((s, ctx) => (RFC3339_UTC.test(s) && !Number.isNaN(Date.parse(s))) || ctx.mustBe("an RFC 3339 UTC time"));
  // A ref reaches the agent: the safe form only, and never a card number (isSafeRef checks both).
  const ref = type("string").narrow((s, ctx) => isSafeRef(s) || ctx.mustBe("a safe ref"));
  return {
    /** `201` to `POST /v1/asks/pay` and `POST /v1/asks/account`. */
    CreatedAnswer: type({
      "+": "reject",
      approval_id: approvalId,
      state: "'pending'",
      expires_at: expiresAt,
    }),
    /**
     * `200` to `GET /v1/asks/{approval_id}`: `ref` only on an approved ask (its reference) or a
     * failed one (why the step behind the approval failed, in the approver's words).
     */
    StatusAnswer: type({ "+": "reject", approval_id: approvalId, state: "'pending' | 'denied' | 'expired'" }).or({
      "+": "reject",
      approval_id: approvalId,
      state: "'approved' | 'failed'",
      "ref?": ref,
    }),
    /** `4xx` with `{"error": CODE}` and nothing else. */
    ErrorAnswer: type({ "+": "reject", error: type.enumerated(...PASSED_ON_CODES) }),
  };
});
export type CreatedAnswer = ReturnType<typeof approverAnswers>["CreatedAnswer"]["infer"];
export type StatusAnswer = ReturnType<typeof approverAnswers>["StatusAnswer"]["infer"];

/**
 * The approver's failure codes that may reach the agent: the field rules (the approver checks
 * every field again, and may be stricter), replay, the pending cap and an unknown ask. Anything
 * else from the approver becomes APPROVER_BAD_ANSWER.
 */
export const PASSED_ON_CODES = [
  "BODY_INVALID",
  "FIELD_UNKNOWN",
  "FIELD_MISSING",
  "APPROVAL_ID_INVALID",
  "MERCHANT_INVALID",
  "AMOUNT_INVALID",
  "AMOUNT_TOO_LARGE",
  "CURRENCY_INVALID",
  "CARD_HANDLE_INVALID",
  "IDENTITY_HANDLE_INVALID",
  "URL_INVALID",
  "REASON_INVALID",
  "CARD_NUMBER_REFUSED",
  "ID_ALREADY_USED",
  "PENDING_LIMIT",
  "ASK_NOT_FOUND",
] as const satisfies readonly ErrorCode[];
export type PassedOnCode = (typeof PASSED_ON_CODES)[number];

/**
 * Reads an error answer: the code only when the body is exactly `{"error": CODE}`, the code is
 * one that may be passed on, and the HTTP status is the code's own status.
 */
export function parseErrorAnswer(status: number, body: unknown): PassedOnCode | undefined {
  const parsed = approverAnswers().ErrorAnswer(body);
  if (isArkErrors(parsed)) return undefined;
  return ERRORS[parsed.error].http === status ? parsed.error : undefined;
}
