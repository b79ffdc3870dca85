// Every error code that crosses the wire, in one table: CODE -> HTTP status. A failure on the
// wire is `{"error":"CODE"}` and nothing else: no message, URL, stack or upstream body, which
// could carry text the agent should not see or a secret it should not keep. Over MCP the same
// body rides as a tool result (`isError: true`, `structuredContent` `{"error": CODE}`), or the
// HTTP answer itself when the request is refused before any MCP exchange (a key, a Host).

export type ErrorSpec = { http: number; meaning: string };

export const ERRORS = {
  // --- request shape (approver HTTP API, desk APIs) ---
  BODY_INVALID: { http: 400, meaning: "the body is not a JSON object" },
  BODY_TOO_LARGE: { http: 413, meaning: "the body is over the size limit" },
  CONTENT_TYPE_INVALID: { http: 415, meaning: "the body is not application/json" },
  FIELD_UNKNOWN: { http: 400, meaning: "a field that the object does not have" },
  FIELD_MISSING: { http: 400, meaning: "a required field is absent" },
  NOT_FOUND: { http: 404, meaning: "no such path, method or object" },

  // --- ask fields (shared core rules) ---
  VERB_INVALID: { http: 400, meaning: "verb is not pay, account_create or status" },
  APPROVAL_ID_INVALID: { http: 400, meaning: "approval_id is not 10 Crockford base32 characters" },
  MERCHANT_INVALID: { http: 400, meaning: "merchant is not 1-80 characters after NFC" },
  AMOUNT_INVALID: { http: 400, meaning: "amount is not a positive plain decimal with the currency's decimals" },
  AMOUNT_TOO_LARGE: { http: 400, meaning: "amount is over the configured maximum" },
  CURRENCY_INVALID: { http: 400, meaning: "currency is not an ISO 4217 code in current use" },
  CARD_HANDLE_INVALID: { http: 400, meaning: "card_handle does not match ^[a-z][a-z0-9-]{0,31}$" },
  IDENTITY_HANDLE_INVALID: { http: 400, meaning: "identity_handle does not match ^[a-z][a-z0-9-]{0,31}$" },
  URL_INVALID: { http: 400, meaning: "not an absolute https URL of at most 2048 characters without credentials" },
  REASON_INVALID: { http: 400, meaning: "reason is not a string of at most 500 characters" },
  CARD_NUMBER_REFUSED: { http: 400, meaning: "a field holds what looks like a card number" },

  // --- approver ---
  ID_ALREADY_USED: { http: 409, meaning: "this approval_id was seen before" },
  PENDING_LIMIT: { http: 429, meaning: "too many asks are pending" },
  ASK_NOT_FOUND: { http: 404, meaning: "no ask with this approval_id" },
  INTERNAL: { http: 500, meaning: "a fault on the server; details are in its own log" },
  DECISION_PENDING: { http: 409, meaning: "the ask has no decision record yet: it is pending, or its step is running" },

  // --- approver: the desk's spend ask (its own listener only) ---
  RESERVATION_ID_INVALID: { http: 400, meaning: "reservation_id is not 1-64 of [A-Za-z0-9_-]" },
  TOOL_INVALID: { http: 400, meaning: "tool is not a desk tool name {upstream}__{tool}" },
  PRICE_INVALID: { http: 400, meaning: "price_mc is not a whole number of millicents from 1 to 10^10" },
  KEY_ID_INVALID: { http: 400, meaning: "key_id is not 1-64 of [A-Za-z0-9_-]" },
  KEY_NAME_INVALID: { http: 400, meaning: "key_name is not well-formed text of at most 200 UTF-16 units" },
  ORG_ID_INVALID: { http: 400, meaning: "org_id is not 1-64 of [A-Za-z0-9_-]" },
  ORG_NAME_INVALID: { http: 400, meaning: "org_name is not well-formed text of 1-200 UTF-16 units" },
  PARAMS_SHA256_INVALID: { http: 400, meaning: "params_sha256 is not 64 lowercase hex" },
  PREVIEW_INVALID: { http: 400, meaning: "preview is not 1-500 characters, preview_cut not a boolean, or a whole preview does not hash to params_sha256" },

  // --- serve-mcp talking to the approver ---
  APPROVER_UNREACHABLE: { http: 502, meaning: "the approver could not be reached" },
  APPROVER_TLS_REFUSED: { http: 502, meaning: "the TLS handshake with the approver failed" },
  APPROVER_TIMEOUT: { http: 504, meaning: "the approver did not answer in time" },
  APPROVER_BAD_ANSWER: { http: 502, meaning: "the approver's answer failed the strict parse" },

  // --- desk: the clearing path ---
  KEY_INVALID: { http: 401, meaning: "unknown, revoked or expired key" },
  TOO_MANY_FAILURES: { http: 429, meaning: "20 failed or running calls of this key this UTC hour" },
  TOOL_UNKNOWN: { http: 404, meaning: "no such tool" },
  ARGS_INVALID: { http: 400, meaning: "the arguments break the tool's input schema" },
  TOOL_NOT_ALLOWED: { http: 403, meaning: "the tool is not on the key's allowlist" },
  BUDGET_EXHAUSTED: { http: 402, meaning: "no room left in the key's budget, or its organization's, for this price" },
  UPSTREAM_ERROR: { http: 502, meaning: "the upstream failed (transport or 5xx); refunded" },
  UPSTREAM_TIMEOUT: { http: 504, meaning: "the upstream did not answer in time; refunded" },
  ARGS_REFUSED: { http: 400, meaning: "the upstream refused the arguments; refunded" },
  TOOL_FAILED: { http: 502, meaning: "the tool reported a failure; refunded" },
  UPSTREAM_AUTH_FAILED: { http: 502, meaning: "the upstream refused the operator's credential, or none could be had; refunded" },
  LEDGER_UNAVAILABLE: { http: 503, meaning: "the ledger cannot serve now (its database unreachable, this node's lease not held); nothing charged" },
  EXPORTS_BUSY: { http: 503, meaning: "every receipts export this desk reads at once is taken, and none ended within the wait" },

  // --- desk: operator API and receipts ---
  ADMIN_TOKEN_INVALID: { http: 401, meaning: "missing or wrong admin token" },
  ORG_UNKNOWN: { http: 404, meaning: "no such organization" },
  KEY_UNKNOWN: { http: 404, meaning: "no such key" },
  RECEIPT_UNKNOWN: { http: 404, meaning: "no such receipt in this organization" },
  RESULT_UNKNOWN: { http: 404, meaning: "no result held for this receipt and key (delivered, expired, or not this key's)" },
  TOPUP_CONFLICT: { http: 409, meaning: "the reference was used by a top-up of another amount, or the organization has no budget to add to" },
  STRIPE_SIGNATURE_INVALID: {
    http: 400,
    meaning: "the Stripe-Signature header is missing, malformed, does not match the body, or its time is outside 5 minutes",
  },
  STRIPE_EVENT_INVALID: { http: 400, meaning: "a signed Stripe event the desk cannot credit: malformed, or in a currency without --topup-rate, or too large" },
  UPSTREAM_UNKNOWN: { http: 404, meaning: "no such upstream" },
  UPSTREAM_EXISTS: { http: 409, meaning: "an upstream with this name exists" },
  UPSTREAM_UNREACHABLE: { http: 502, meaning: "the MCP handshake with the upstream failed, or openapi_url did not answer" },
  UPSTREAM_HOST_REFUSED: { http: 403, meaning: "the upstream URL names a link-local or unspecified address that --allow-upstream-host does not" },
  UPSTREAM_SCHEMA_REFUSED: { http: 502, meaning: "a tool's input schema has a pattern RE2 cannot run, or does not compile" },
  UPSTREAM_DOCUMENT_REFUSED: { http: 400, meaning: "the OpenAPI document is refused; problems lists why" },
  VALUE_INVALID: { http: 400, meaning: "a field of an operator request has a bad value" },

  // --- desk: the MCP endpoint and the sandbox ---
  HOST_REFUSED: { http: 403, meaning: "the Host or Origin header names a site this desk does not serve" },
  METHOD_NOT_ALLOWED: { http: 405, meaning: "the MCP endpoint is stateless: POST only" },
  SANDBOX_OFF: { http: 404, meaning: "the operator has not turned the sandbox on" },
  SANDBOX_LIMIT: { http: 429, meaning: "this network, or all networks together, had their sandbox keys for this UTC day" },
  ADDRESS_UNKNOWN: { http: 400, meaning: "the caller's address could not be read (behind --trust-proxy: no X-Forwarded-For)" },

  // --- desk: calls that wait for a person (the approver link) ---
  APPROVAL_PENDING: { http: 202, meaning: "the call waits for a person on the approver; repeat it with its approval id" },
  APPROVAL_DENIED: { http: 403, meaning: "the person denied the call; refunded" },
  APPROVAL_EXPIRED: { http: 403, meaning: "nobody decided in time, or the approved call was not repeated in time; refunded" },
  APPROVAL_MISMATCH: { http: 409, meaning: "the repeated call's tool or arguments are not the ones the approval covers" },
  APPROVAL_USED: { http: 409, meaning: "this approval has been used: an approval lets one call through" },
  APPROVAL_UNKNOWN: { http: 404, meaning: "no approval with this id for this key" },
  APPROVER_UNAVAILABLE: {
    http: 503,
    meaning: "the approver could not be reached, is full or is not configured: a new call reserves nothing, a repeated one keeps its reservation",
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export const isErrorCode = (value: unknown): value is ErrorCode => typeof value === "string" && Object.hasOwn(ERRORS, value);

/**
 * Names that may stand beside a code, pointing at what failed: the operator's request field
 * (`field`), the upstream tool whose schema was refused and why (`tool`, `reason`), the reasons
 * an operator's OpenAPI document is refused (`problems`: places and operations of the document
 * the operator gave, for the operator). Never a secret, an agent's value or an upstream's answer.
 */
export type ErrorDetail = { field?: string; tool?: string; reason?: string; problems?: readonly string[] };

/** The one shape of a failure on the wire. */
export const errorBody = (code: ErrorCode, detail?: ErrorDetail): { error: ErrorCode } & ErrorDetail => ({ error: code, ...detail });

/** A JSON Response for a failure: the code's status, `{"error":CODE}` (and its detail), nothing else. */
export function errorResponse(code: ErrorCode, headers?: Record<string, string>, detail?: ErrorDetail): Response {
  return Response.json(errorBody(code, detail), { status: ERRORS[code].http, headers });
}

/**
 * A failure that crosses the wire as `{"error":CODE}` (plus its detail), thrown from wherever it
 * is found (a body reader, a field rule, a domain operation) and answered by the face that
 * caught it. Its status is the table's; nothing else of it (no message) is ever sent.
 */
export class WireError extends Error {
  override name = "WireError";
  constructor(
    readonly code: ErrorCode,
    readonly detail?: ErrorDetail,
  ) {
    super(code);
  }

  get status(): number {
    return ERRORS[this.code].http;
  }

  response(headers?: Record<string, string>): Response {
    return errorResponse(this.code, headers, this.detail);
  }
}
