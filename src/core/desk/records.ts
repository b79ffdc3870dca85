// What the desk keeps, as the domain reads it: organizations, keys, upstreams and tools, receipts,
// audit entries, signing keys, the sandbox. Every ledger adapter returns these (no storage types:
// no integer booleans, no JSON text to parse again), and takes them back through the ports.
import type { OrgRecord } from "../finance/org-records.ts";
import type { ReceiptJwk } from "../receipt/index.ts";
import type { RestOperation } from "../rest/operation.ts";
import type { AuthSettings } from "../upstream/auth-config.ts";
import type { PlainOutcome, ReceiptOutcome, SettleOutcome } from "./outcomes.ts";
import type { Reset } from "./period.ts";

export type Org = { id: string; name: string; createdAt: number };

export type DeskKey = {
  id: string;
  orgId: string;
  name: string;
  budgetMc: number;
  /** The spend of the key's latest period (see spentIn). */
  spentMc: number;
  reset: Reset;
  /** The period `spentMc` belongs to. */
  period: string;
  allow: readonly string[];
  /** The key's own prices, by tool name (a tool not named here costs its default). */
  prices: Readonly<Record<string, number>>;
  expiresAt: number | null;
  revokedAt: number | null;
  createdAt: number;
  /** The UTC hour `failCount` counts in (the failure limit, SPEC 8.3). */
  failHour: string;
  failCount: number;
  /** Percentages of the budget whose crossing raises an alert (SPEC 8.17). */
  alertThresholds: readonly number[];
  /** A call priced above this waits for a person (approval.ts); null: never. */
  approveAboveMc: number | null;
};

/** A key as it is created: its secret is stored only as the lookup prefix and the hash. */
export type NewKey = {
  id: string;
  orgId: string;
  name: string;
  lookup: string;
  secretSha256: Uint8Array;
  budgetMc: number;
  reset: Reset;
  period: string;
  allow: readonly string[];
  prices: Readonly<Record<string, number>>;
  expiresAt: number | null;
  /** Absent: null (never waits for a person). */
  approveAboveMc?: number | null;
  now: number;
  /** Default: DEFAULT_THRESHOLDS. */
  alertThresholds?: readonly number[];
};

/** What an operator may change on a key (reset is fixed at creation). */
export type KeyPatch = {
  name?: string;
  budgetMc?: number;
  allow?: readonly string[];
  prices?: Readonly<Record<string, number>>;
  expiresAt?: number | null;
  alertThresholds?: readonly number[];
  approveAboveMc?: number | null;
};

/** What a key has spent in `period`: it keeps the spend of its latest period only. */
export function spentIn(key: Pick<DeskKey, "period" | "spentMc">, period: string): number {
  return key.period === period ? key.spentMc : 0;
}

/** The kinds of upstream the desk speaks to; each has its connector (ports.ts). */
export type UpstreamKind = "mcp" | "rest";

/** Where a REST upstream's OpenAPI document comes from: the operator's URL, or the document itself (stored). */
export type DocumentSource = { url: string } | { inline: true };

export type UpstreamRecord = {
  name: string;
  kind: UpstreamKind;
  /** An MCP upstream's endpoint, or a REST upstream's base_url. */
  url: string;
  /**
   * Credential headers sealed as one blob by a desk older than upstream credentials (seal.ts,
   * the upstream's name as additional data); moved into `auth` at the next start-up.
   */
  sealedHeaders: string | null;
  /** The names of those headers, or of a `header` credential's: the operator may see them again. */
  headerNames: readonly string[];
  /** The credential's settings (never a secret: those are sealed fields of its credential store); null without one. */
  auth: AuthSettings | null;
  /** A REST upstream's document source; null for MCP. */
  document: DocumentSource | null;
  createdAt: number;
  refreshedAt: number;
};

export type NewUpstream = Omit<UpstreamRecord, "createdAt" | "refreshedAt" | "sealedHeaders" | "headerNames" | "document"> & {
  /** A REST upstream's document: given by URL, or the document itself, stored to be read again at refresh. */
  document: { url: string } | { inline: Record<string, unknown> } | null;
  /** The credential's sealed fields (credential-store.ts), stored in the same transaction. */
  sealedFields: Readonly<Record<string, string>>;
  now: number;
};

/** One tool of an upstream's listing, as registration and refresh store it. */
export type ToolListing = {
  /** The desk's name for it: `{upstream}__{tool}`. */
  name: string;
  upstreamTool: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** The upstream's listed fields agents see unchanged (title, outputSchema, annotations, _meta). */
  listing: Record<string, unknown>;
  /** A REST tool's stored operation, from which each call's request is built; null for MCP tools. */
  operation: RestOperation | null;
};

export type ToolRecord = ToolListing & {
  upstream: string;
  priceMc: number;
  upstreamCostMc: number;
  /** False once its upstream stopped listing it (its price is kept). */
  active: boolean;
};

export type ReceiptRecord = {
  id: string;
  orgId: string;
  keyId: string;
  seq: number;
  issuedAt: number;
  tool: string;
  outcome: ReceiptOutcome;
  period: string;
  amountMc: number;
  kid: string;
  /** SHA-256 of the signed payload bytes: what the next receipt's prev_sha256 holds. */
  sha256: string;
  /** The envelope as signed and stored (JSON text), answered as it is. */
  envelope: string;
};

/**
 * A receipt row as `desk check` reads it: the columns, and what was signed as the ledger keeps
 * it (the payload text and signature bytes its envelope is made from when answered), or, for a
 * converted row that keeps its own envelope text, that text, answered as it is.
 */
export type StoredReceiptRecord = Omit<ReceiptRecord, "envelope"> & { payload: string; signature: Uint8Array; envelope: string | null };

export type AuditEntry = {
  at: number;
  orgId: string;
  keyId: string;
  tool: string;
  outcome: ReceiptOutcome | PlainOutcome;
  httpStatus: number;
  priceMc: number;
  upstreamCostMc: number;
  marginMc: number;
  receiptId: string | null;
};

export type AuditFilter = { orgId: string | null; keyId: string | null; sinceMs: number | null; limit: number };

/** An audit row that names a receipt (one a migration kept because it said other than the receipt), and that receipt's payload and issue time; null when there is none. */
export type KeptAuditRow = { entry: AuditEntry; receipt: { payload: string; issuedAt: number } | null };

export type SigningKeyRecord = { kid: string; publicJwk: ReceiptJwk; createdAt: number; retiredAt: number | null };

/** The result of a charged call whose agent disconnected, kept for it to fetch. */
export type HeldResult = { receiptId: string; keyId: string; result: Record<string, unknown>; heldUntil: number };

export type SandboxSettings = { tools: readonly string[]; budgetMc: number; ttlS: number; keysPerDay: number; updatedAt: number };

/** One sandbox key handed out, under the per-network and all-networks limits of its UTC day. */
export type SandboxGrant = {
  /** UTC day, "2026-11-30". */
  day: string;
  /** "203.0.113.0/24" or "2001:db8:1:2::/64". */
  network: string;
  limit: number;
  /** Keys of `day` across all networks. */
  dayLimit: number;
  org: Org;
  key: NewKey;
};

/**
 * An organization's budget: every key of the org draws on it as well as on its own. Kept from the
 * org's first budget record on; the spend is counted while the budget is unlimited too, so a
 * budget set later starts from what the period already spent.
 */
export type OrgBudget = {
  /** null: unlimited. */
  budgetMc: number | null;
  /** Fixed by the org's first budget record. */
  reset: Reset;
  /** The period `spentMc` belongs to (the org's latest). */
  period: string;
  spentMc: number;
};

/** A signed budget record (`topup`, `budget_set`) as stored: `sha256` is what the next record's prev_sha256 holds. */
export type StoredOrgRecord = { record: OrgRecord; sha256: string; envelope: string };

export type AlertScope = "key" | "org";

/** A budget alert in the outbox, with its delivery state. */
export type AlertRecord = {
  id: string;
  scope: AlertScope;
  /** The key or the org whose budget it is about. */
  subjectId: string;
  orgId: string;
  keyId: string;
  period: string;
  thresholdPct: number;
  budgetMc: number;
  /** The exact bytes every attempt sends (canonical JSON of the event). */
  body: string;
  createdAt: number;
  /** When the next attempt is due (while neither delivered nor given up). */
  nextAt: number;
  attempts: number;
  lastError: string | null;
  deliveredAt: number | null;
  gaveUpAt: number | null;
};

/** What the desk recorded of the spend ask it sent for a reserved call (MoneyLedger.awaitApproval). */
export type ApprovalAsked = {
  approvalId: string;
  /** SHA-256 of the canonical JSON of the ask as sent, `{verb: "spend", ...}`: the person's decision must name it. */
  askSha256: string;
  /** When the approver lets the ask expire (its answer's `expires_at`). */
  expiresAt: number;
};

/** A reservation held for a call that waits for a person, as a repeat of the call finds it. */
export type ApprovalHold = ApprovalAsked & {
  reservationId: number;
  keyId: string;
  orgId: string;
  tool: string;
  priceMc: number;
  paramsSha256: string;
  /** The budget period the price was reserved in. */
  period: string;
  /** awaiting: no decision has been acted on; claimed: the approval was used, its call runs or ran. */
  stage: "awaiting" | "claimed";
  /** Once the reservation is settled: how, and its receipt. */
  settled: { outcome: SettleOutcome; receipt: ReceiptRecord | null } | null;
};
