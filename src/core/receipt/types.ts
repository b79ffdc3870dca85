// The desk receipt and its signed envelope, with a strict reader that names the first field
// that is wrong. Money is integer millicents (1 cent = 1,000 mc). Version 1 is every receipt of
// a call that needed nobody's approval; version 2 adds `approval`, the approver's signed decision
// on the call, and is the version of every receipt of a call that waited for a person.
import { canonicalJson } from "./canonical.ts";

export const RECEIPT_VERSION = 1;
export const APPROVAL_RECEIPT_VERSION = 2;

export const OUTCOMES = [
  "charged",
  "refused_not_allowed",
  "refused_budget",
  "refused_org_budget",
  "refunded_upstream_error",
  "refunded_timeout",
  "refunded_args_refused",
  "refunded_abandoned",
] as const;

/** Outcomes of a call that waited for a person, who denied it or did not decide in time (version 2 only). */
export const APPROVAL_OUTCOMES = ["refunded_denied", "refunded_expired"] as const;

/** The outcomes of version 1, which every receipt may have. */
export type Outcome = (typeof OUTCOMES)[number];
export type ApprovalOutcome = (typeof APPROVAL_OUTCOMES)[number];

/**
 * The approver's decision envelope (core/decision) without its readable copy: the payload is the
 * signed decision record, checked with the approver's key set.
 */
export type ApprovalEnvelope = { payload: string; signature: string; kid: string };

export type Receipt = {
  /** 1, or 2 exactly when `approval` is there. */
  v: 1 | 2;
  /** The desk's receipt id (unique across the desk). */
  id: string;
  /** RFC 7638 thumbprint of the signing key; also the `kid` of its JWK. */
  kid: string;
  /** RFC 3339 UTC with milliseconds: `2026-11-30T12:34:56.789Z`. */
  issued_at: string;
  org_id: string;
  key_id: string;
  tool: string;
  outcome: Outcome | ApprovalOutcome;
  http_status: number;
  price_mc: number;
  /** What was finally charged: at most price_mc when charged, 0 otherwise. */
  amount_mc: number;
  upstream_cost_mc: number;
  remaining_mc: number;
  /** The budget period the call was taken from: "none", "2026-11-30" (daily) or "2026-11" (monthly). */
  period: string;
  /** SHA-256 hex of the RFC 8785 form of the tool arguments. */
  params_sha256: string;
  /** SHA-256 hex of the RFC 8785 form of `resultForHashing(result)` when charged; null otherwise. */
  result_sha256: string | null;
  /** Position in this key's chain, from 1, no gaps. */
  seq: number;
  /** SHA-256 hex of the previous receipt's payload bytes in this key's chain; null when seq is 1. */
  prev_sha256: string | null;
  /** Version 2: the person's signed decision on this call. */
  approval?: ApprovalEnvelope;
};

/** What the desk supplies to sign: everything but `v` and `kid`, which the signer sets. */
export type ReceiptFields = Omit<Receipt, "v" | "kid">;

export type Envelope = {
  /** base64url (no padding) of the UTF-8 bytes of canonicalJson(receipt). */
  payload: string;
  /** base64url (no padding) of the Ed25519 signature over those same bytes (not the base64 text). */
  signature: string;
  /** The signing key's kid (equal to receipt.kid; a hint for finding the key, not trusted alone). */
  kid: string;
  /** The readable copy; a verifier checks it equals the payload. */
  receipt: Receipt;
};

/** Field order of the readable copy (the payload is canonical, so sorted, whatever this says). */
export const RECEIPT_FIELDS = [
  "v",
  "id",
  "kid",
  "issued_at",
  "org_id",
  "key_id",
  "tool",
  "outcome",
  "http_status",
  "price_mc",
  "amount_mc",
  "upstream_cost_mc",
  "remaining_mc",
  "period",
  "params_sha256",
  "result_sha256",
  "seq",
  "prev_sha256",
] as const satisfies readonly (keyof Receipt)[];

/** Field order of a version 2 receipt: version 1's, then the approval. */
export const RECEIPT_FIELDS_V2 = [...RECEIPT_FIELDS, "approval"] as const satisfies readonly (keyof Receipt)[];

/** The fields of a receipt of version `v` (a receipt of an unknown version has none). */
export const receiptFields = (v: unknown): readonly (keyof Receipt)[] => (v === 2 ? RECEIPT_FIELDS_V2 : RECEIPT_FIELDS);

const HEX64 = /^[0-9a-f]{64}$/;
const ISSUED_AT = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z$/;
const PERIOD = /^(none|\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)$/;
const OUTCOME_SET = new Set<string>(OUTCOMES);
const APPROVAL_OUTCOME_SET = new Set<string>([...OUTCOMES, ...APPROVAL_OUTCOMES]);
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** A decision record is well under 2 KB; its base64url is checked for shape only here (core/decision reads it). */
const MAX_APPROVAL_PAYLOAD = 8192;

const isText = (v: unknown) => typeof v === "string" && v.length > 0 && v.length <= 200;
const isMoney = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** `{payload, signature, kid}`, each a string of its own form and nothing else. */
function isApprovalEnvelope(v: unknown): boolean {
  if (!isRecord(v) || Object.keys(v).length !== 3) return false;
  const { payload, signature, kid } = v;
  return (
    typeof payload === "string" &&
    payload.length <= MAX_APPROVAL_PAYLOAD &&
    BASE64URL.test(payload) &&
    typeof signature === "string" &&
    signature.length === 86 &&
    BASE64URL.test(signature) &&
    isText(kid)
  );
}

const RULES: Record<keyof Receipt, (v: unknown) => boolean> = {
  v: (v) => v === RECEIPT_VERSION || v === APPROVAL_RECEIPT_VERSION,
  id: isText,
  kid: isText,
  issued_at: (v) => typeof v === "string" && ISSUED_AT.test(v),
  org_id: isText,
  key_id: isText,
  tool: isText,
  outcome: (v) => typeof v === "string" && APPROVAL_OUTCOME_SET.has(v),
  http_status: (v) => Number.isInteger(v) && (v as number) >= 100 && (v as number) <= 599,
  price_mc: isMoney,
  amount_mc: isMoney,
  upstream_cost_mc: isMoney,
  remaining_mc: isMoney,
  period: (v) => typeof v === "string" && PERIOD.test(v),
  params_sha256: (v) => typeof v === "string" && HEX64.test(v),
  result_sha256: (v) => v === null || (typeof v === "string" && HEX64.test(v)),
  seq: (v) => Number.isSafeInteger(v) && (v as number) >= 1,
  prev_sha256: (v) => v === null || (typeof v === "string" && HEX64.test(v)),
  approval: isApprovalEnvelope,
};

/**
 * The first problem with `value` as a receipt (version 1 or 2), as `field: what`, or null when it
 * is one. Beyond each field's type: the chain start (seq 1 <=> prev_sha256 null); only a
 * `charged` outcome moves money (never above the price) and only it binds a result; the
 * outcomes of a denial or an expiry only in version 2. That the approval really approves the
 * call is checked with the approver's keys (core/decision/verify.ts), not here.
 */
export function receiptProblem(value: unknown): string | null {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "receipt: not an object";
  const record = value as Record<string, unknown>;
  if (!RULES.v(record.v)) return Object.hasOwn(record, "v") ? "v: invalid value" : "v: missing";
  const fields = receiptFields(record.v);
  for (const key of Object.keys(record)) if (!(fields as readonly string[]).includes(key)) return `${key}: unknown field`;
  for (const field of fields) {
    if (!Object.hasOwn(record, field)) return `${field}: missing`;
    if (!RULES[field](record[field])) return `${field}: invalid value`;
  }
  const r = record as Receipt;
  if (r.v === RECEIPT_VERSION && !OUTCOME_SET.has(r.outcome)) return "outcome: a denial or an expiry needs a receipt of version 2";
  if ((r.seq === 1) !== (r.prev_sha256 === null)) return "prev_sha256: must be null exactly when seq is 1";
  const charged = r.outcome === "charged";
  if (charged ? r.amount_mc > r.price_mc : r.amount_mc !== 0) {
    return "amount_mc: must be at most price_mc when charged and 0 otherwise";
  }
  if (charged !== (r.result_sha256 !== null)) return "result_sha256: must be set exactly when charged";
  return null;
}

// The receipt's keys in RFC 8785 order (UTF-16 code units), each with its `"key":` prefix.
const SORTED_PREFIXES = [...RECEIPT_FIELDS].sort().map((field, i) => [field, `${i === 0 ? "{" : ","}${JSON.stringify(field)}:`] as const);

/**
 * canonicalJson of a receipt that passed receiptProblem, without the generic walk for version 1
 * (the signer and the verifier run it once per receipt). Returns null where canonicalJson would
 * throw: a string that is not well-formed Unicode. A test holds it equal to canonicalJson.
 */
export function canonicalReceipt(receipt: Receipt): string | null {
  if (receipt.v !== RECEIPT_VERSION) {
    try {
      return canonicalJson(receipt);
    } catch {
      return null;
    }
  }
  const record = receipt as Record<string, unknown>;
  let out = "";
  for (const [field, prefix] of SORTED_PREFIXES) {
    const value = record[field];
    if (typeof value === "string" && !value.isWellFormed()) return null;
    out += prefix + JSON.stringify(value);
  }
  return `${out}}`;
}

/**
 * canonicalReceipt(receipt) === text, without building the string for version 1: `desk check`
 * and verify-receipt hold every payload to its one canonical form, field by field in place.
 */
export function isCanonicalReceipt(receipt: Receipt, text: string): boolean {
  if (receipt.v !== RECEIPT_VERSION) return canonicalReceipt(receipt) === text;
  const record = receipt as Record<string, unknown>;
  let at = 0;
  for (const [field, prefix] of SORTED_PREFIXES) {
    const value = record[field];
    if (typeof value === "string" && !value.isWellFormed()) return false;
    const json = JSON.stringify(value) as string | undefined;
    if (json === undefined || !text.startsWith(prefix, at) || !text.startsWith(json, at + prefix.length)) return false;
    at += prefix.length + json.length;
  }
  return at === text.length - 1 && text.endsWith("}");
}
