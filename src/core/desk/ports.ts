// The ports of the desk domain: what it needs from the world, as small interfaces. The domain
// never imports an implementation; SQLite (adapters/sqlite/desk) is today's ledger and the MCP
// client (adapters/mcp-upstream) today's upstream. Another backend is another adapter passing
// the same tests. Every ledger method is async, so an adapter may be a network database.
import type { AlertOutbox } from "../finance/alert-outbox.ts";
import type { OrgRecordFields } from "../finance/org-records.ts";
import type { StatementReceipt, StatementRecord } from "../finance/statement.ts";
import type { SpendAsk } from "../asks.ts";
import { type ErrorCode, WireError } from "../errors.ts";
import type { ApprovalEnvelope, ReceiptJwk, SignedReceipt } from "../receipt/index.ts";
import type { ReceiptKeys } from "../receipt/verify.ts";
import type { AuthSettings } from "../upstream/auth-config.ts";
import type { Credential } from "../upstream/credential.ts";
import type { CredentialStore } from "../upstream/credential-store.ts";
import type { CallOutcome, UpstreamTool } from "../upstream/outcome.ts";
import type { ArgsProblem } from "./args.ts";
import type { CheckedPage } from "./check-receipt.ts";
import type { PlainOutcome, ReceiptOutcome, SettleOutcome } from "./outcomes.ts";
import type { Reset } from "./period.ts";
import type {
  AlertRecord,
  ApprovalAsked,
  ApprovalHold,
  AuditEntry,
  AuditFilter,
  DeskKey,
  HeldResult,
  KeptAuditRow,
  KeyPatch,
  NewKey,
  NewUpstream,
  Org,
  OrgBudget,
  ReceiptRecord,
  SandboxGrant,
  SandboxSettings,
  SigningKeyRecord,
  StoredOrgRecord,
  StoredReceiptRecord,
  ToolListing,
  ToolRecord,
  UpstreamRecord,
} from "./records.ts";
import type { SealingKey } from "./seal.ts";

/** Milliseconds since the epoch. */
export type Clock = () => number;

/** One log line for the operator (never a secret, never agent text). */
export type Log = (line: string) => void;

// --- the ledger ------------------------------------------------------------------------------

/** A write the ledger refused on what it holds: a name taken, a row gone, a budget below its spend. */
export class LedgerConflict extends Error {
  override name = "LedgerConflict";
  constructor(readonly code: "EXISTS" | "MISSING" | "OVER_BUDGET") {
    super(code);
  }
}

/**
 * The ledger cannot serve now (a network database unreachable, a transaction that failed, this
 * node's lease not held): answered 503 LEDGER_UNAVAILABLE by every face, and on the clearing
 * path before any upstream call. Whether a write that failed this way committed is unknown to
 * the caller (a COMMIT whose answer was lost).
 */
export class LedgerUnavailable extends WireError {
  override name = "LedgerUnavailable";
  constructor(readonly reason: string) {
    super("LEDGER_UNAVAILABLE");
  }
}

/** Every receipts export the ledger reads at once is taken, and none ended within the wait: 503 EXPORTS_BUSY. */
export class ExportsBusy extends WireError {
  override name = "ExportsBusy";
  constructor() {
    super("EXPORTS_BUSY");
  }
}

/** One call on the clearing path, as far as the ledger needs it. */
export type CallContext = {
  key: DeskKey;
  tool: string;
  priceMc: number;
  upstreamCostMc: number;
  paramsSha256: string;
  now: number;
  /** The UTC hour at `now` (hourOf). */
  hour: string;
  /** The key's period at `now` (for its reset kind). */
  period: string;
};

/** Where a new receipt sits in its key's hash chain. */
export type ChainLink = { seq: number; prevSha256: string | null };

/** What the ledger knows when a receipt is made, inside the transaction that stores it. */
export type ReceiptFacts = {
  /** The id the receipt must carry (chosen by the ledger, which stores it with the call). */
  receiptId: string;
  link: ChainLink;
  keyId: string;
  orgId: string;
  tool: string;
  outcome: ReceiptOutcome;
  httpStatus: number;
  priceMc: number;
  amountMc: number;
  upstreamCostMc: number;
  remainingMc: number;
  period: string;
  paramsSha256: string;
  /** Set exactly when charged: the hash of the result that was paid for. */
  resultSha256: string | null;
  issuedAt: number;
  /** The person's signed decision on the call, when it waited for one: the receipt is then version 2. */
  approval?: ApprovalEnvelope | null;
};

/**
 * A signed receipt, ready to store: `sha256` is what the next receipt's prev_sha256 holds;
 * `issuedAt` the time it carries, taken when it was signed inside the transaction that stores
 * it (so a statement made in a later transaction sees every receipt issued before it);
 * `signed` what a ledger stores of it (the envelope is derived from it when read: envelopeText).
 */
export type StoredReceipt = { id: string; kid: string; sha256: string; envelope: string; issuedAt: number; signed: SignedReceipt };

/**
 * Signs a receipt from its facts. The ledger calls it inside the transaction that stores the
 * receipt, so a chain link and its receipt commit together or not at all.
 */
export type ReceiptMaker = (facts: ReceiptFacts) => StoredReceipt;

export type ReserveResult =
  | { kind: "reserved"; reservationId: number; remainingMc: number }
  /** `short`: whose budget had no room, the key's own or its organization's; `alerts`: how many the refusal wrote. */
  | { kind: "no_room"; receipt: StoredReceipt; remainingMc: number; short: "key" | "org"; alerts: number }
  /** FAILURES_PER_HOUR calls of this hour failed or are still running: an audit row, no count. */
  | { kind: "rate_limited"; remainingMc: number }
  | { kind: "key_gone" };

export type Settlement = {
  reservationId: number;
  outcome: SettleOutcome;
  resultSha256: string | null;
  now: number;
  /** The decision to bind (a denial, an expiry) when the reservation holds none yet; one claimed with the call is bound anyway. */
  approval?: ApprovalEnvelope;
};

export type SettleResult =
  /** `alerts`: how many budget alerts the charge wrote (in its own transaction). */
  | { kind: "settled"; receipt: StoredReceipt; remainingMc: number; alerts: number }
  /** Someone settled it first (the abandoned-reservation sweep): nothing changed. */
  | { kind: "already_settled"; receipt: ReceiptRecord | null; outcome: SettleOutcome | null; remainingMc: number };

/**
 * The money path. Each method is one transaction: its money, receipt and audit row commit
 * together or not at all, and nothing is answered before it is durable. No method reads and
 * then writes outside that transaction.
 */
export interface MoneyLedger {
  /** 429 (not counted), 404 or 400 ARGS_INVALID (counted as a failure): an audit row, no receipt. */
  recordPlainRefusal(ctx: CallContext, outcome: PlainOutcome): Promise<void>;
  /** 403: a signed receipt, a failure counted, no money moves. */
  refuseNotAllowed(ctx: CallContext, make: ReceiptMaker): Promise<{ receipt: StoredReceipt; remainingMc: number }>;
  /**
   * The one conditional reservation: the key's budget and its organization's, the period resets
   * and the failure limit are checked in one statement.
   */
  reserve(ctx: CallContext, make: ReceiptMaker): Promise<ReserveResult>;
  /** Charges or refunds an open reservation, into the periods (the key's, the org's) it was taken from. */
  settle(settlement: Settlement, make: ReceiptMaker): Promise<SettleResult>;
  /**
   * Ids of reservations nobody else will settle: this desk's own still open whose call started
   * before `beforeMs` (all of them: Infinity; an ordinary call from its reservation, an approved
   * one from its claim), and, where several desk nodes share the ledger, every open one of a node
   * whose lease has run out. A reservation awaiting a person's decision is never among them
   * (approvalsDue finds those).
   */
  openReservations(beforeMs: number): Promise<number[]>;
  /**
   * Undoes a reservation whose spend ask never reached the approver, as if it had not been made:
   * its price goes back, the row goes, and the failure it counted goes too unless `outcome`
   * counts as one (countsAsFailure); an audit row records `outcome`. False when the reservation
   * is no longer open and unasked (nothing changed).
   */
  release(reservationId: number, ctx: CallContext, outcome: PlainOutcome): Promise<{ released: boolean; remainingMc: number }>;
  /** Records the spend ask sent for an open reservation; false when it is no longer open (nothing changed). */
  awaitApproval(reservationId: number, asked: ApprovalAsked): Promise<boolean>;
  /** The reservation an approval id names (awaiting, claimed or settled), or null. */
  approval(approvalId: string): Promise<ApprovalHold | null>;
  /**
   * The one atomic use of an approval: an open reservation awaiting a decision becomes claimed,
   * with the decision it will bind and `now` as the start of its call. True for exactly one caller.
   */
  claimApproval(reservationId: number, approval: ApprovalEnvelope, now: number): Promise<boolean>;
  /** Open reservations still awaiting a decision whose ask expired before `beforeMs`. */
  approvalsDue(beforeMs: number): Promise<ApprovalHold[]>;
  /** Keeps a result until `heldUntil`; past ones go first and a key keeps its `perKey` newest. */
  holdResult(held: HeldResult & { now: number; perKey: number }): Promise<void>;
  /**
   * Deletes at most `limit` settled reservations made before `beforeMs` that no approval names,
   * in one transaction, folding what desk check and a first org budget read of them (the count,
   * the charges per org, org period and UTC day) into a summary in the same transaction; how
   * many it deleted. The newest reservation is never deleted, so no id is ever given twice (a
   * late settlement of a pruned one must never find another call's).
   */
  pruneSettled(beforeMs: number, limit: number): Promise<number>;
}

export interface OrgStore {
  create(org: Org): Promise<void>;
  get(id: string): Promise<Org | null>;
  list(): Promise<Org[]>;
}

export interface KeyStore {
  create(key: NewKey): Promise<void>;
  get(id: string): Promise<DeskKey | null>;
  /**
   * The key whose secret hashes to `secretSha256`, found by its lookup prefix and compared in
   * constant time. Revoked and expired keys are returned too: the caller decides.
   */
  find(lookup: string, secretSha256: Uint8Array): Promise<DeskKey | null>;
  list(orgId: string | null): Promise<DeskKey[]>;
  /** MISSING, or OVER_BUDGET when a budget is below what the key's period at `now` spent. */
  patch(id: string, patch: KeyPatch, now: number): Promise<DeskKey>;
  /** A new secret; the old one stops matching at once. False when there is no such key. */
  rotate(id: string, lookup: string, secretSha256: Uint8Array): Promise<boolean>;
  revoke(id: string, now: number): Promise<boolean>;
}

export interface CatalogStore {
  upstream(name: string): Promise<UpstreamRecord | null>;
  upstreams(): Promise<UpstreamRecord[]>;
  /** Stores an upstream with its tools and its credential's sealed fields in one transaction, durably; EXISTS when the name is taken. */
  addUpstream(upstream: NewUpstream, tools: readonly ToolListing[]): Promise<void>;
  /** The OpenAPI document a REST upstream was registered with inline; null when it has none. */
  storedDocument(upstream: string): Promise<Record<string, unknown> | null>;
  /** Replaces an upstream's tools: new ones appear, gone ones go inactive, prices stay. MISSING. */
  refreshTools(upstream: string, tools: readonly ToolListing[], now: number): Promise<void>;
  tool(name: string): Promise<ToolRecord | null>;
  tools(): Promise<ToolRecord[]>;
  /** False when there is no such tool. */
  setPrice(name: string, priceMc: number, upstreamCostMc: number): Promise<boolean>;
  /**
   * A value that changes whenever an upstream, a tool or a price changes, through this desk or
   * any other sharing the ledger: the desk reloads its catalog when it moved.
   */
  stamp(): Promise<number>;
}

export interface RecordStore {
  receipt(id: string): Promise<ReceiptRecord | null>;
  /** One key's receipts issued at or after `sinceMs`, in chain order, at most `limit`. */
  keyReceipts(keyId: string, sinceMs: number, limit: number): Promise<ReceiptRecord[]>;
  /**
   * Receipts in issue order (per key, in chain order), optionally of one org and since a time, a
   * page at a time (at most `pageSize` each): the export streams them without holding them all.
   * Ends with the receipts stored when it began.
   */
  receiptPages(filter: { orgId: string | null; sinceMs: number | null }, pageSize: number): AsyncIterable<ReceiptRecord[]>;
  /**
   * The same receipts as the export's bytes: NDJSON, each receipt's envelope text and "\n", in
   * chunks of whole lines, each read only when the one before was taken (at most one read ahead).
   * Ends with the receipts stored when it began (when it was asked for, or at its first chunk).
   * A ledger that reads only so many exports at once makes a further one wait for a place: it
   * throws ExportsBusy when none comes within its wait, and stops waiting when `signal` aborts.
   */
  exportChunks(filter: { orgId: string | null; sinceMs: number | null }, signal?: AbortSignal): AsyncIterable<Uint8Array>;
  audit(filter: AuditFilter): Promise<AuditEntry[]>;
  /** The held result of a receipt while it is held at `now`. */
  heldResult(receiptId: string, now: number): Promise<HeldResult | null>;
  /** Which of these receipts have a result held at `now`. */
  heldAmong(receiptIds: readonly string[], now: number): Promise<Set<string>>;
  /** Publishes a signing key; every other one of this desk (node) is retired at `now`. */
  addSigningKey(kid: string, publicJwk: ReceiptJwk, now: number): Promise<void>;
  signingKeys(): Promise<SigningKeyRecord[]>;
  meta(name: string): Promise<string | null>;
  /** Sets a value once; false when it was already set (two first starts racing). */
  setMetaOnce(name: string, value: string): Promise<boolean>;
}

export interface SandboxStore {
  settings(): Promise<SandboxSettings | null>;
  /** Turns the sandbox on, or changes it; keys already handed out keep what they were given. */
  set(settings: SandboxSettings): Promise<void>;
  /** Turns it off; whether it was on. */
  clear(): Promise<boolean>;
  /**
   * Creates the org and the key when the network has had fewer than `limit` keys on the day and
   * all networks together fewer than `dayLimit`, in one transaction; false (nothing written) otherwise.
   */
  grant(grant: SandboxGrant): Promise<boolean>;
  /** Keys counted for `network` on `day`. */
  grants(day: string, network: string): Promise<number>;
}

/** Signs an org's budget record from its fields; the ledger calls it inside the transaction that stores it. */
export type OrgRecordMaker = (fields: OrgRecordFields) => StoredOrgRecord;

/** A budget change: `budgetMc` null is unlimited; `reset` is needed with the first one and fixed after it (null: keep). */
export type BudgetChange = { orgId: string; budgetMc: number | null; reset: Reset | null; now: number };

export type BudgetChangeResult =
  /** `record`: the budget_set written, or null when the budget was already this. */
  | { kind: "set"; record: StoredOrgRecord | null; budget: OrgBudget }
  | { kind: "missing" }
  /** The first budget of an org needs its reset. */
  | { kind: "reset_needed" }
  /** The reset differs from the one the first record fixed. */
  | { kind: "reset_fixed" }
  /** Below what the org's current period already spent (charges and reservations). */
  | { kind: "over_budget" };

export type Topup = { orgId: string; amountMc: number; reference: string; now: number };

export type TopupResult =
  /** `existing`: a top-up with this reference and amount was already counted; this is its record. */
  | { kind: "added" | "existing"; record: StoredOrgRecord; budget: OrgBudget }
  | { kind: "missing" }
  /** The org has no budget (unlimited, or none set yet): there is nothing to add to. */
  | { kind: "unlimited" }
  /** The reference was used with another amount. */
  | { kind: "conflict" }
  /** The budget would pass 2^53 - 1 mc. */
  | { kind: "too_large" };

/** What a statement is computed from, read in one transaction; `issuedAt` taken inside it. */
export type StatementData = { issuedAt: number; records: StatementRecord[]; receipts: StatementReceipt[] };

/** Organization budgets and their signed records (top-ups, budget changes). */
export interface FinanceStore {
  /** The org's budget; null when it never had one (unlimited, nothing counted) or there is no such org. */
  budget(orgId: string): Promise<OrgBudget | null>;
  /**
   * Sets the budget and writes its signed budget_set record, in one transaction. The first one
   * fixes the reset and counts what the org's current period already spent.
   */
  setBudget(change: BudgetChange, make: OrgRecordMaker): Promise<BudgetChangeResult>;
  /** Adds to the budget and writes its signed topup record, once per reference, in one transaction. */
  topUp(topup: Topup, make: OrgRecordMaker): Promise<TopupResult>;
  /** The org's records in chain order. */
  records(orgId: string): Promise<StoredOrgRecord[]>;
  /**
   * The org's records, and its receipts issued before `issuedAt`, read in one transaction that
   * takes `issuedAt` from `clock` once it holds the ledger: every receipt issued before that
   * moment is committed and among them.
   */
  statementData(orgId: string, clock: Clock): Promise<StatementData>;
  /** The org's alert thresholds; null when there is no such org. */
  thresholds(orgId: string): Promise<readonly number[] | null>;
  /** False when there is no such org. */
  setThresholds(orgId: string, thresholds: readonly number[]): Promise<boolean>;
}

/**
 * The alert outbox (SPEC 8.17): the money path writes alerts in the transaction of the charge or
 * refusal that raised them; the delivery loop drains them (AlertOutbox); the operator lists them.
 */
export interface AlertStore extends AlertOutbox {
  /** Newest first, optionally of one org. */
  list(filter: { orgId: string | null; limit: number }): Promise<AlertRecord[]>;
  /**
   * Frees the leases of attempts no process is running any more, so their alerts are sent again
   * at once under their ids (SQLite: every lease, as one desk holds the data directory;
   * PostgreSQL: those of this node's id, never another live node's).
   */
  releaseLeases(): Promise<number>;
}

/**
 * Upstream credentials: each upstream's sealed fields (credential-store.ts), which only the
 * desk's sealing key opens. Every write is durable when it resolves (a rotated refresh token
 * must survive a crash right after), whatever durability the money path runs with.
 */
export interface CredentialStores {
  /** The store of one upstream's fields, as its credential reads and saves them. */
  of(upstream: string): CredentialStore;
  /**
   * Replaces an upstream's credential in one transaction: its settings (null: none), every
   * sealed field (old tokens and a refused grant's state go), and sealed headers of an older
   * desk. MISSING when there is no such upstream.
   */
  replace(upstream: string, settings: AuthSettings | null, sealedFields: Readonly<Record<string, string>>): Promise<void>;
}

/** The `desk check` invariants, as the ledger sees them. */
export interface LedgerCheck {
  /** For every key and period, spent = charges + open reservations, and the counts agree: what is wrong. */
  money(): Promise<string[]>;
  /** Every receipt, by key and in each key's chain order, a page (at most `pageSize`) at a time. */
  receiptsInChainOrder(pageSize: number): AsyncIterable<StoredReceiptRecord[]>;
  /** Every audit row that names a receipt, with that receipt, in the order written, a page at a time. */
  keptAudit(pageSize: number): AsyncIterable<KeptAuditRow[]>;
}

/**
 * Checks pages of receipts for `desk check` (checkReceipts in check-receipt.ts), on this thread
 * or on others: each page's answer lists its receipts in the page's order. Pages may be handed
 * in before earlier ones are answered.
 */
export interface ReceiptPageChecker {
  check(page: StoredReceiptRecord[]): Promise<CheckedPage>;
  /** Ends the checker (its threads); pages not yet answered are rejected. */
  close(): Promise<void>;
}

/** The desk ledger: one object per backend holding every store. */
export interface DeskLedger {
  readonly money: MoneyLedger;
  readonly orgs: OrgStore;
  readonly keys: KeyStore;
  readonly catalog: CatalogStore;
  readonly records: RecordStore;
  readonly sandbox: SandboxStore;
  readonly finance: FinanceStore;
  readonly alerts: AlertStore;
  readonly credentials: CredentialStores;
  readonly check: LedgerCheck;
  /** Whether the ledger can serve calls now (GET /healthz): reachable, and this node's lease held. */
  healthy(): Promise<boolean>;
  /** Finishes background work and closes; nothing is lost that a method had answered. */
  close(): Promise<void>;
}

// --- upstreams -------------------------------------------------------------------------------
// What a call comes to and what an upstream lists are every upstream adapter's vocabulary
// (core/upstream/outcome.ts).

/** A paid tool server. */
export interface Upstream {
  readonly name: string;
  /** Every tool it serves; throws on any failure (registration reports it). */
  listTools(): Promise<UpstreamTool[]>;
  /**
   * Problems that stop `args` (already valid against the tool's input schema) from becoming a
   * request at all, found without sending anything: the clearing path refuses them before any
   * spend. A REST tool's request building; absent when every valid argument can be sent.
   */
  checkArgs?(tool: string, args: Record<string, unknown>): ArgsProblem[];
  /** One call within the deadline; never throws. */
  call(tool: string, args: Record<string, unknown>): Promise<CallOutcome>;
  close(): Promise<void>;
}

/** What an upstream is opened with, whatever its kind. */
export type UpstreamTarget = {
  name: string;
  /** An MCP upstream's endpoint, or a REST upstream's base_url. */
  url: URL;
  /** The operator's credential, put on every request to the upstream (NO_CREDENTIAL without one). */
  credential: Credential;
  timeoutMs: number;
  /** Its stored tools: a REST upstream calls from their stored operations (an MCP upstream lists its own). */
  tools: readonly ToolListing[];
};

/** Opens an upstream of one kind. */
export interface UpstreamConnector {
  open(target: UpstreamTarget): Upstream;
}

/** The REST kind also fetches a document from the operator's `openapi_url` (bounded in size and time, no redirect). */
export interface RestConnector extends UpstreamConnector {
  fetchDocument(url: URL, timeoutMs: number): Promise<unknown>;
}

export type UpstreamConnectors = { readonly mcp: UpstreamConnector; readonly rest: RestConnector };

/** Opens a credential from its settings and its store's sealed fields; SealedFieldError when one does not open. */
export type CredentialOpener = (options: {
  upstream: string;
  settings: AuthSettings | null;
  store: CredentialStore;
  sealingKey: SealingKey;
  timeoutMs: number;
  /** The desk's clock, which a cached token's expiry is read against. */
  now: Clock;
}) => Promise<Credential>;

// --- the approver ----------------------------------------------------------------------------
// The person's side (SPEC 7.1), reached over mutual TLS by an adapter (adapters/approver-link).

/** A spend ask as the desk sends it (core/schema/spend-ask.ts holds its rules). */
export type SpendAskBody = Omit<SpendAsk, "kind">;

export type AskAnswer =
  | { kind: "pending"; expiresAt: number }
  /** The approver refused a field (the desk checks the same rules first; a newer approver may be stricter). */
  | { kind: "refused"; code: ErrorCode }
  /** Unreachable, timed out, full (PENDING_LIMIT) or an answer that is none of the above; `why` names it for the log. */
  | { kind: "unavailable"; why: string };

export type DecisionAnswer =
  | { kind: "pending" }
  /** The approver's signed decision record, as it sent it: the desk verifies it before acting on it. */
  | { kind: "decided"; envelope: unknown }
  | { kind: "unavailable"; why: string }
  /** An answer that is neither a decision nor "pending" (another ask, a status it should not give). */
  | { kind: "bad_answer"; why: string };

export interface Approver {
  /** `POST /v1/asks/spend`; never throws. */
  ask(ask: SpendAskBody): Promise<AskAnswer>;
  /** `GET /v1/asks/{id}/decision`; never throws. */
  decision(approvalId: string): Promise<DecisionAnswer>;
}

/**
 * The approver's decision keys as the desk's operator pinned them (`--approver-keys`): a decision
 * signed by any other key is never acted on. `reload` reads them again (after the approver's key
 * was rotated) and gives null when they cannot be read, keeping the old ones.
 */
export interface DecisionKeys {
  current(): ReceiptKeys;
  reload(): ReceiptKeys | null;
}

export type ApproverConnection = { approver: Approver; keys: DecisionKeys };

// --- signing keys ----------------------------------------------------------------------------

/** Keeps a new receipt-signing key (PKCS#8 PEM) before the desk signs with it. */
export type SigningKeyStore = (privatePem: string) => void;
