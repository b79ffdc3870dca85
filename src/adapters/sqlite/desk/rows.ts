// The desk ledger's rows as SQLite returns them, and each one's reading as a domain record
// (core/desk/records.ts): integer booleans become booleans, JSON text is parsed once, here.
import type { PlainOutcome, ReceiptOutcome, SettleOutcome } from "../../../core/desk/outcomes.ts";
import type { Reset } from "../../../core/desk/period.ts";
import type {
  AlertRecord,
  AlertScope,
  AuditEntry,
  DeskKey,
  Org,
  OrgBudget,
  ReceiptRecord,
  SigningKeyRecord,
  StoredOrgRecord,
  StoredReceiptRecord,
  ToolRecord,
  UpstreamKind,
  UpstreamRecord,
} from "../../../core/desk/records.ts";
import type { OrgRecordEnvelope } from "../../../core/finance/org-records.ts";
import { envelopeText, type ReceiptJwk } from "../../../core/receipt/index.ts";
import type { RestOperation } from "../../../core/rest/operation.ts";
import type { AuthSettings } from "../../../core/upstream/auth-config.ts";

export type OrgRow = { id: string; name: string; created_at: number };

export type UpstreamRow = {
  name: string;
  url: string;
  sealed_headers: string | null;
  /** JSON array of names. */
  header_names: string;
  created_at: number;
  refreshed_at: number;
  kind: UpstreamKind;
  /** JSON: the credential's settings, or NULL. */
  auth: string | null;
  openapi_url: string | null;
};

/** The columns of UpstreamRow: every one but the inline document, read only at refresh. */
export const UPSTREAM_COLUMNS = "name, url, sealed_headers, header_names, created_at, refreshed_at, kind, auth, openapi_url";

export type ToolRow = {
  name: string;
  upstream: string;
  upstream_tool: string;
  description: string;
  /** JSON object. */
  input_schema: string;
  price_mc: number;
  upstream_cost_mc: number;
  active: number;
  /** JSON object: the upstream's listed fields agents see unchanged (title, outputSchema, annotations, _meta). */
  listing: string;
  /** JSON: a REST tool's stored operation, or NULL. */
  operation: string | null;
};

export type KeyRow = {
  id: string;
  org_id: string;
  name: string;
  lookup: string;
  secret_sha256: Uint8Array;
  budget_mc: number;
  spent_mc: number;
  reset: Reset;
  period: string;
  /** JSON array of tool names. */
  allow: string;
  /** JSON object: tool name to price. */
  prices: string;
  expires_at: number | null;
  revoked_at: number | null;
  created_at: number;
  fail_hour: string;
  fail_count: number;
  /** JSON array of percentages. */
  alert_thresholds: string;
  approve_above_mc: number | null;
};

/** A receipt row: what was signed (payload, signature), its hash and time, and the columns read out of the payload. */
export type ReceiptRow = {
  payload: string;
  signature: Uint8Array;
  sha256: Uint8Array;
  /** The envelope text of a converted row that is not exactly the derived one; null otherwise. */
  envelope: string | null;
  id: string;
  org_id: string;
  key_id: string;
  seq: number;
  issued_at: number;
  tool: string;
  outcome: ReceiptOutcome;
  period: string;
  amount_mc: number;
  kid: string;
};

export type AuditRow = {
  at: number;
  org_id: string;
  key_id: string;
  tool: string;
  outcome: ReceiptOutcome | PlainOutcome;
  http_status: number;
  price_mc: number;
  upstream_cost_mc: number;
  margin_mc: number;
  receipt_id: string | null;
};

export type ReservationRow = {
  id: number;
  key_id: string;
  org_id: string;
  tool: string;
  period: string;
  price_mc: number;
  upstream_cost_mc: number;
  params_sha256: string;
  created_at: number;
  state: "open" | "settled";
  outcome: SettleOutcome | null;
  receipt_id: string | null;
  approval_id: string | null;
  ask_sha256: string | null;
  approval_expires_at: number | null;
  approval_stage: "awaiting" | "claimed" | null;
  /** JSON of the signed decision envelope a claimed approval binds. */
  approval: string | null;
  claimed_at: number | null;
  /** The org period the reservation drew on; null when the org kept no budget then. */
  org_period: string | null;
};

export type OrgBudgetRow = { org_id: string; budget_mc: number | null; reset: Reset; period: string; spent_mc: number };

export type OrgRecordRow = {
  org_id: string;
  seq: number;
  id: string;
  type: "topup" | "budget_set";
  issued_at: number;
  amount_mc: number;
  budget_mc: number | null;
  reference: string | null;
  sha256: string;
  envelope: string;
};

export type AlertRow = {
  id: string;
  scope: AlertScope;
  subject_id: string;
  org_id: string;
  key_id: string;
  period: string;
  threshold_pct: number;
  budget_mc: number;
  body: string;
  created_at: number;
  next_at: number;
  leased_until: number | null;
  attempts: number;
  last_error: string | null;
  delivered_at: number | null;
  gave_up_at: number | null;
};

export type SigningKeyRow = { kid: string; public_jwk: string; created_at: number; retired_at: number | null };

/** Characters of JSON text kept parsed at most; past it the cache starts over. */
const PARSED_CACHE_CHARS = 4 * 1024 * 1024;
const parsed = new Map<string, unknown>();
let parsedChars = 0;

/**
 * JSON text of a key's allowlist or prices, parsed once per distinct text (frozen: shared by
 * every read of every key that holds the same text). The clearing path reads a key on every call,
 * and the same few texts come back again and again.
 */
function parsedOnce<T>(text: string): T {
  let value = parsed.get(text);
  if (value === undefined) {
    value = Object.freeze(JSON.parse(text));
    if (parsedChars + text.length > PARSED_CACHE_CHARS) {
      parsed.clear();
      parsedChars = 0;
    }
    parsed.set(text, value);
    parsedChars += text.length;
  }
  return value as T;
}

export const orgOf = (r: OrgRow): Org => ({ id: r.id, name: r.name, createdAt: r.created_at });

export function keyOf(r: KeyRow): DeskKey {
  return {
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    budgetMc: r.budget_mc,
    spentMc: r.spent_mc,
    reset: r.reset,
    period: r.period,
    allow: parsedOnce<readonly string[]>(r.allow),
    prices: parsedOnce<Readonly<Record<string, number>>>(r.prices),
    expiresAt: r.expires_at,
    revokedAt: r.revoked_at,
    createdAt: r.created_at,
    failHour: r.fail_hour,
    failCount: r.fail_count,
    alertThresholds: parsedOnce<readonly number[]>(r.alert_thresholds),
    approveAboveMc: r.approve_above_mc,
  };
}

export const orgBudgetOf = (r: OrgBudgetRow): OrgBudget => ({ budgetMc: r.budget_mc, reset: r.reset, period: r.period, spentMc: r.spent_mc });

export function orgRecordOf(r: Pick<OrgRecordRow, "sha256" | "envelope">): StoredOrgRecord {
  return { record: (JSON.parse(r.envelope) as OrgRecordEnvelope).record, sha256: r.sha256, envelope: r.envelope };
}

export const alertOf = (r: AlertRow): AlertRecord => ({
  id: r.id,
  scope: r.scope,
  subjectId: r.subject_id,
  orgId: r.org_id,
  keyId: r.key_id,
  period: r.period,
  thresholdPct: r.threshold_pct,
  budgetMc: r.budget_mc,
  body: r.body,
  createdAt: r.created_at,
  nextAt: r.next_at,
  attempts: r.attempts,
  lastError: r.last_error,
  deliveredAt: r.delivered_at,
  gaveUpAt: r.gave_up_at,
});

export function upstreamOf(r: UpstreamRow): UpstreamRecord {
  return {
    name: r.name,
    kind: r.kind,
    url: r.url,
    sealedHeaders: r.sealed_headers,
    headerNames: JSON.parse(r.header_names) as string[],
    auth: r.auth === null ? null : (JSON.parse(r.auth) as AuthSettings),
    document: r.kind !== "rest" ? null : r.openapi_url !== null ? { url: r.openapi_url } : { inline: true },
    createdAt: r.created_at,
    refreshedAt: r.refreshed_at,
  };
}

export function toolOf(r: ToolRow): ToolRecord {
  return {
    name: r.name,
    upstream: r.upstream,
    upstreamTool: r.upstream_tool,
    description: r.description,
    inputSchema: JSON.parse(r.input_schema) as Record<string, unknown>,
    listing: JSON.parse(r.listing) as Record<string, unknown>,
    operation: r.operation === null ? null : (JSON.parse(r.operation) as RestOperation),
    priceMc: r.price_mc,
    upstreamCostMc: r.upstream_cost_mc,
    active: r.active === 1,
  };
}

export function receiptOf(r: ReceiptRow): ReceiptRecord {
  return { ...receiptColumnsOf(r), envelope: r.envelope ?? envelopeText({ payload: r.payload, signature: r.signature }) };
}

/** A receipt row as `desk check` reads it: its columns, and what was signed, with no envelope written out. */
export function storedReceiptOf(r: ReceiptRow): StoredReceiptRecord {
  return { ...receiptColumnsOf(r), payload: r.payload, signature: r.signature, envelope: r.envelope };
}

function receiptColumnsOf(r: ReceiptRow): Omit<ReceiptRecord, "envelope"> {
  return {
    id: r.id,
    orgId: r.org_id,
    keyId: r.key_id,
    seq: r.seq,
    issuedAt: r.issued_at,
    tool: r.tool,
    outcome: r.outcome,
    period: r.period,
    amountMc: r.amount_mc,
    kid: r.kid,
    sha256: Buffer.from(r.sha256).toString("hex"),
  };
}

export function auditOf(r: AuditRow): AuditEntry {
  return {
    at: r.at,
    orgId: r.org_id,
    keyId: r.key_id,
    tool: r.tool,
    outcome: r.outcome,
    httpStatus: r.http_status,
    priceMc: r.price_mc,
    upstreamCostMc: r.upstream_cost_mc,
    marginMc: r.margin_mc,
    receiptId: r.receipt_id,
  };
}

export const signingKeyOf = (r: SigningKeyRow): SigningKeyRecord => ({
  kid: r.kid,
  publicJwk: JSON.parse(r.public_jwk) as ReceiptJwk,
  createdAt: r.created_at,
  retiredAt: r.retired_at,
});
