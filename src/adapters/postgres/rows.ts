// The desk ledger's rows as Bun's client returns them from PostgreSQL (int8 as BigInt, text[] as
// arrays, jsonb parsed, bytea as a Buffer), and each one's reading as a domain record
// (core/desk/records.ts). Money and times past 2^53 are a fault here, never rounded (toSafe).
import type { PlainOutcome, ReceiptOutcome } from "../../core/desk/outcomes.ts";
import type { Reset } from "../../core/desk/period.ts";
import type {
  AuditEntry,
  DeskKey,
  Org,
  ReceiptRecord,
  SigningKeyRecord,
  StoredReceiptRecord,
  ToolRecord,
  UpstreamKind,
  UpstreamRecord,
} from "../../core/desk/records.ts";
import { envelopeText, type Receipt, type ReceiptJwk, readableReceipt, sha256Hex } from "../../core/receipt/index.ts";
import type { RestOperation } from "../../core/rest/operation.ts";
import type { AuthSettings } from "../../core/upstream/auth-config.ts";
import { toSafe } from "./money.ts";

type Int8 = bigint;

const orNull = (v: Int8 | null) => (v === null ? null : toSafe(v));

/** An integer[] column (alert thresholds), which the client returns as an Int32Array. */
export const percentagesOf = (v: ArrayLike<number>): number[] => Array.from(v);

export type OrgRow = { id: string; name: string; created_at: Int8 };

export const orgOf = (r: OrgRow): Org => ({ id: r.id, name: r.name, createdAt: toSafe(r.created_at) });

export type KeyRow = {
  id: string;
  org_id: string;
  name: string;
  lookup: string;
  secret_sha256: Uint8Array;
  budget_mc: Int8;
  spent_mc: Int8;
  reset: Reset;
  period: string;
  allow: string[];
  prices: Record<string, number>;
  expires_at: Int8 | null;
  revoked_at: Int8 | null;
  created_at: Int8;
  fail_hour: string;
  fail_count: number;
  alert_thresholds: ArrayLike<number>;
  approve_above_mc: Int8 | null;
};

export function keyOf(r: KeyRow): DeskKey {
  return {
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    budgetMc: toSafe(r.budget_mc),
    spentMc: toSafe(r.spent_mc),
    reset: r.reset,
    period: r.period,
    allow: r.allow,
    prices: r.prices,
    expiresAt: orNull(r.expires_at),
    revokedAt: orNull(r.revoked_at),
    createdAt: toSafe(r.created_at),
    failHour: r.fail_hour,
    failCount: r.fail_count,
    alertThresholds: percentagesOf(r.alert_thresholds),
    approveAboveMc: orNull(r.approve_above_mc),
  };
}

export type UpstreamRow = {
  name: string;
  url: string;
  sealed_headers: string | null;
  header_names: string[];
  created_at: Int8;
  refreshed_at: Int8;
  kind: UpstreamKind;
  /** JSON text: the credential's settings, or NULL. */
  auth: string | null;
  openapi_url: string | null;
};

/** The columns of UpstreamRow: every one but the inline document, read only at refresh. */
export const UPSTREAM_COLUMNS = "name, url, sealed_headers, header_names, created_at, refreshed_at, kind, auth, openapi_url";

export const upstreamOf = (r: UpstreamRow): UpstreamRecord => ({
  name: r.name,
  kind: r.kind,
  url: r.url,
  sealedHeaders: r.sealed_headers,
  headerNames: r.header_names,
  auth: r.auth === null ? null : (JSON.parse(r.auth) as AuthSettings),
  document: r.kind !== "rest" ? null : r.openapi_url !== null ? { url: r.openapi_url } : { inline: true },
  createdAt: toSafe(r.created_at),
  refreshedAt: toSafe(r.refreshed_at),
});

export type ToolRow = {
  name: string;
  upstream: string;
  upstream_tool: string;
  description: string;
  input_schema: string;
  listing: string;
  /** JSON text: a REST tool's stored operation, or NULL. */
  operation: string | null;
  price_mc: Int8;
  upstream_cost_mc: Int8;
  active: boolean;
};

/** The columns of ToolRow. */
export const TOOL_COLUMNS = "name, upstream, upstream_tool, description, input_schema, listing, operation, price_mc, upstream_cost_mc, active";

export const toolOf = (r: ToolRow): ToolRecord => ({
  name: r.name,
  upstream: r.upstream,
  upstreamTool: r.upstream_tool,
  description: r.description,
  inputSchema: JSON.parse(r.input_schema) as Record<string, unknown>,
  listing: JSON.parse(r.listing) as Record<string, unknown>,
  operation: r.operation === null ? null : (JSON.parse(r.operation) as RestOperation),
  priceMc: toSafe(r.price_mc),
  upstreamCostMc: toSafe(r.upstream_cost_mc),
  active: r.active,
});

/** A receipt row: the columns the queries filter on, what was signed (payload, signature), and a converted row's own envelope text. */
export type ReceiptRow = {
  id: string;
  org_id: string;
  key_id: string;
  seq: Int8;
  issued_at: Int8;
  outcome: ReceiptOutcome;
  period: string;
  amount_mc: Int8;
  payload: string;
  signature: Uint8Array;
  /** The envelope text of a converted row that is not exactly the derived one; null otherwise. */
  envelope: string | null;
};

/** A receipt record: its tool, kid and hash read out of the signed payload, its envelope derived from it. */
export function receiptOf(r: ReceiptRow): ReceiptRecord {
  const receipt = readableReceipt(r.payload);
  return { ...receiptColumnsOf(r, receipt), envelope: r.envelope ?? envelopeText({ payload: r.payload, signature: r.signature }, receipt) };
}

/** A receipt row as `desk check` reads it: its columns, and what was signed, with no envelope written out. */
export function storedReceiptOf(r: ReceiptRow): StoredReceiptRecord {
  return { ...receiptColumnsOf(r, readableReceipt(r.payload)), payload: r.payload, signature: r.signature, envelope: r.envelope };
}

function receiptColumnsOf(r: ReceiptRow, receipt: Receipt): Omit<ReceiptRecord, "envelope"> {
  return {
    id: r.id,
    orgId: r.org_id,
    keyId: r.key_id,
    seq: toSafe(r.seq),
    issuedAt: toSafe(r.issued_at),
    tool: receipt.tool,
    outcome: r.outcome,
    period: r.period,
    amountMc: toSafe(r.amount_mc),
    kid: receipt.kid,
    sha256: sha256Hex(r.payload),
  };
}

/** The columns of a receipt row, in the order receiptOf reads them. */
export const RECEIPT_COLUMNS = "id, org_id, key_id, seq, issued_at, outcome, period, amount_mc, payload, signature, envelope";

export type AuditRow = {
  at: Int8;
  org_id: string;
  key_id: string;
  tool: string;
  outcome: ReceiptOutcome | PlainOutcome;
  http_status: number;
  price_mc: Int8;
  upstream_cost_mc: Int8;
  margin_mc: Int8;
  receipt_id: string | null;
};

export const auditOf = (r: AuditRow): AuditEntry => ({
  at: toSafe(r.at),
  orgId: r.org_id,
  keyId: r.key_id,
  tool: r.tool,
  outcome: r.outcome,
  httpStatus: r.http_status,
  priceMc: toSafe(r.price_mc),
  upstreamCostMc: toSafe(r.upstream_cost_mc),
  marginMc: toSafe(r.margin_mc),
  receiptId: r.receipt_id,
});

export const signingKeyOf = (r: { kid: string; public_jwk: string; created_at: number; retired_at: number | null }): SigningKeyRecord => ({
  kid: r.kid,
  publicJwk: JSON.parse(r.public_jwk) as ReceiptJwk,
  createdAt: r.created_at,
  retiredAt: r.retired_at,
});
