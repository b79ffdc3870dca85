// The approver's decision record (version 1): what was decided on which ask, on which recap,
// when, and where it sits in the approver's one chain. Signed like a desk receipt (Ed25519 over
// RFC 8785 canonical JSON, sign.ts). A strict reader names the first field that is wrong.
import { FAILURE_REFS } from "../asks.ts";
import { isApprovalId, isSafeRef } from "../ids.ts";
import { MAX_PRICE_MC } from "../money/millicents.ts";

export const DECISION_VERSION = 1;

export const DECISION_VERBS = ["pay", "account", "spend"] as const;
export type DecisionVerb = (typeof DECISION_VERBS)[number];

export const DECISIONS = ["approved", "denied", "expired", "failed"] as const;
export type DecisionKind = (typeof DECISIONS)[number];

/** What a spend approval lets through: the desk checks these against the call it holds. */
export type SpendBinding = {
  reservation_id: string;
  tool: string;
  price_mc: number;
  key_id: string;
  org_id: string;
  params_sha256: string;
};

export type DecisionRecord = {
  v: 1;
  /** RFC 7638 thumbprint of the approver's decision-signing key. */
  kid: string;
  /** Position in this approver's chain, from 1, no gaps. */
  seq: number;
  /** SHA-256 hex of the previous record's payload bytes; null exactly when seq is 1. */
  prev_sha256: string | null;
  approval_id: string;
  verb: DecisionVerb;
  /** SHA-256 hex of the RFC 8785 form of the stored ask (core/asks.ts askObject). */
  ask_sha256: string;
  /** SHA-256 hex of the recap bytes the console last wrote for the ask; null exactly when expired. */
  recap_sha256: string | null;
  decision: DecisionKind;
  /**
   * approved: the reference approver's `demo-` ref or the step's first line, null for a spend ask
   * (the desk makes the call); failed: why (FAILURE_REFS); denied, expired: null.
   */
  ref: string | null;
  /** When the person typed the decision (for expired: the ask's expires_at). RFC 3339 UTC, ms. */
  decided_at: string;
  /** When this record was made (the step's end, or the moment an expiry was noticed). */
  recorded_at: string;
  /** The call a spend ask covers; null exactly when the verb is not spend. */
  spend: SpendBinding | null;
};

/** What the ledger supplies to sign: everything but `v` and `kid`, which the signer sets. */
export type DecisionFields = Omit<DecisionRecord, "v" | "kid">;

export type DecisionEnvelope = {
  /** base64url (no padding) of the UTF-8 bytes of the record's canonical JSON. */
  payload: string;
  /** base64url (no padding) of the Ed25519 signature over those bytes. */
  signature: string;
  kid: string;
  /** The readable copy; a verifier checks it equals the payload. */
  decision: DecisionRecord;
};

/** Field order of the readable copy (the payload is canonical, so sorted). */
export const DECISION_FIELDS = [
  "v",
  "kid",
  "seq",
  "prev_sha256",
  "approval_id",
  "verb",
  "ask_sha256",
  "recap_sha256",
  "decision",
  "ref",
  "decided_at",
  "recorded_at",
  "spend",
] as const satisfies readonly (keyof DecisionRecord)[];

export const SPEND_BINDING_FIELDS = [
  "reservation_id",
  "tool",
  "price_mc",
  "key_id",
  "org_id",
  "params_sha256",
] as const satisfies readonly (keyof SpendBinding)[];

const HEX64 = /^[0-9a-f]{64}$/;
const TIME = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z$/;
const DESK_TOOL = /^[a-z][a-z0-9-]{0,31}__[A-Za-z0-9_.-]{1,128}$/;
const FIELD_SET = new Set<string>(DECISION_FIELDS);
const FAILURES = new Set<string>(FAILURE_REFS);

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isHex = (v: unknown) => typeof v === "string" && HEX64.test(v);
const isTime = (v: unknown) => typeof v === "string" && TIME.test(v) && !Number.isNaN(Date.parse(v));

const RULES: Record<keyof DecisionRecord, (v: unknown) => boolean> = {
  v: (v) => v === DECISION_VERSION,
  kid: (v) => typeof v === "string" && v.length > 0 && v.length <= 200,
  seq: (v) => Number.isSafeInteger(v) && (v as number) >= 1,
  prev_sha256: (v) => v === null || isHex(v),
  approval_id: isApprovalId,
  verb: (v) => typeof v === "string" && (DECISION_VERBS as readonly string[]).includes(v),
  ask_sha256: isHex,
  recap_sha256: (v) => v === null || isHex(v),
  decision: (v) => typeof v === "string" && (DECISIONS as readonly string[]).includes(v),
  ref: (v) => v === null || isSafeRef(v),
  decided_at: isTime,
  recorded_at: isTime,
  spend: (v) => v === null || isRecord(v),
};

/** The first problem with `value` as a spend binding, or null. */
function spendProblem(value: Record<string, unknown>): string | null {
  for (const key of Object.keys(value)) if (!(SPEND_BINDING_FIELDS as readonly string[]).includes(key)) return `spend.${key}: unknown field`;
  const rules: Record<keyof SpendBinding, (v: unknown) => boolean> = {
    reservation_id: isSafeRef,
    tool: (v) => typeof v === "string" && DESK_TOOL.test(v),
    price_mc: (v) => Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= MAX_PRICE_MC,
    key_id: isSafeRef,
    org_id: isSafeRef,
    params_sha256: isHex,
  };
  for (const field of SPEND_BINDING_FIELDS) {
    if (!Object.hasOwn(value, field)) return `spend.${field}: missing`;
    if (!rules[field](value[field])) return `spend.${field}: invalid value`;
  }
  return null;
}

/** The ref a decision must carry, as a rule: null when it holds, else what is wrong. */
function refProblem(r: DecisionRecord): string | null {
  switch (r.decision) {
    case "approved":
      if (r.verb === "spend") return r.ref === null ? null : "ref: must be null on an approved spend ask";
      return r.ref !== null ? null : "ref: must be set on an approved pay or account ask";
    case "failed":
      if (r.verb === "spend") return "decision: a spend ask has no step, so it cannot fail";
      return r.ref !== null && FAILURES.has(r.ref) ? null : "ref: must name why the step failed";
    default:
      return r.ref === null ? null : `ref: must be null when ${r.decision}`;
  }
}

/**
 * The first problem with `value` as a v1 decision record, as `field: what`, or null. Beyond each
 * field's type: the chain start (seq 1 <=> prev_sha256 null), a recap for every decision a
 * person typed (none for an expiry), the ref rule, the spend binding exactly on spend asks, and
 * decided_at not after recorded_at.
 */
export function decisionProblem(value: unknown): string | null {
  if (!isRecord(value)) return "decision: not an object";
  for (const key of Object.keys(value)) if (!FIELD_SET.has(key)) return `${key}: unknown field`;
  for (const field of DECISION_FIELDS) {
    if (!Object.hasOwn(value, field)) return `${field}: missing`;
    if (!RULES[field](value[field])) return `${field}: invalid value`;
  }
  const r = value as DecisionRecord;
  if ((r.seq === 1) !== (r.prev_sha256 === null)) return "prev_sha256: must be null exactly when seq is 1";
  if ((r.decision === "expired") !== (r.recap_sha256 === null)) return "recap_sha256: must be null exactly when expired";
  const ref = refProblem(r);
  if (ref !== null) return ref;
  if ((r.verb === "spend") !== (r.spend !== null)) return "spend: must be set exactly on a spend ask";
  if (r.spend !== null) {
    const spend = spendProblem(r.spend as unknown as Record<string, unknown>);
    if (spend !== null) return spend;
  }
  if (Date.parse(r.decided_at) > Date.parse(r.recorded_at)) return "decided_at: after recorded_at";
  return null;
}
