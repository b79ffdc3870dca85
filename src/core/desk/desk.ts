// The desk as one object: the operations its faces (the agents' REST API and MCP endpoint, the
// operator API, the sandbox) call, over the ports it is built with (ports.ts). Each operation
// lives in the module of its concern; this file only wires them. Tests build it in-process, the
// binary from its data directory.
import type { Envelope, Jwks, ReceiptSigner } from "../receipt/index.ts";
import { Catalog, type ToolEntry } from "./catalog.ts";
import { allowedTools, type ClearingCall, clear, validKey } from "./clearing.ts";
import type { DeskContext } from "./context.ts";
import * as keys from "./keys.ts";
import * as orgBudgets from "./org-budgets.ts";
import * as statements from "./statements.ts";
import type { StatementEnvelope } from "../finance/statement.ts";
import { DEFAULT_UPSTREAM_TIMEOUT_MS } from "./limits.ts";
import type { ClearingOutcome } from "./outcomes.ts";
import type { AuthConfig } from "../upstream/auth-config.ts";
import type { ApproverConnection, Clock, CredentialOpener, DeskLedger, Log, ReceiptMaker, SigningKeyStore, UpstreamConnectors } from "./ports.ts";
import * as receipts from "./receipts.ts";
import type { Reset } from "./period.ts";
import type { AlertRecord, AuditEntry, AuditFilter, DeskKey, KeyPatch, Org, ReceiptRecord, SandboxSettings, StoredOrgRecord, ToolRecord } from "./records.ts";
import { sweepAbandoned, sweepApprovals, sweepStale } from "./recovery.ts";
import { type Registered, UpstreamRegistry, type UpstreamSpec, type UpstreamState } from "./registry.ts";
import * as sandbox from "./sandbox.ts";
import type { SealingKey } from "./seal.ts";
import { Signing } from "./signing.ts";
import { UnsettledCalls } from "./unsettled.ts";
import { WireError } from "../errors.ts";

export type DeskOptions = {
  ledger: DeskLedger;
  /** One connector per kind of upstream (adapters/mcp-upstream for "mcp", adapters/rest-upstream for "rest"). */
  connectors: UpstreamConnectors;
  /** Opens an upstream's credential from its settings and sealed fields (adapters/upstream-auth). */
  openCredential: CredentialOpener;
  signer: ReceiptSigner;
  sealingKey: SealingKey;
  now?: Clock;
  upstreamTimeoutMs?: number;
  log?: Log;
  /** Keeps a new signing key before the desk signs with it; the binary writes its data dir. */
  storeSigningKey?: SigningKeyStore;
  /** Link-local or unspecified upstream hosts the operator allows (--allow-upstream-host), as URL hostnames. */
  allowUpstreamHosts?: readonly string[];
  /** Told after a commit that wrote budget alerts (the delivery loop's poke). */
  alertsWritten?: () => void;
  /** The approver and its pinned decision keys (--approver): without it, a call above its key's threshold is 503. */
  approver?: ApproverConnection;
};

export class Desk {
  readonly #d: DeskContext;

  private constructor(d: DeskContext) {
    this.#d = d;
  }

  /** Builds the desk: publishes the signer's key, opens every upstream, compiles every schema. */
  static async open(options: DeskOptions): Promise<Desk> {
    const now = options.now ?? Date.now;
    const log = options.log ?? (() => {});
    const upstreamTimeoutMs = options.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS;
    const catalog = new Catalog(options.ledger.catalog, log);
    const registry = new UpstreamRegistry({
      store: options.ledger.catalog,
      credentials: options.ledger.credentials,
      catalog,
      connectors: options.connectors,
      openCredential: options.openCredential,
      sealingKey: options.sealingKey,
      timeoutMs: upstreamTimeoutMs,
      allowHosts: new Set(options.allowUpstreamHosts ?? []),
      now,
      log,
    });
    const signing = new Signing(options.signer, options.ledger.records, options.storeSigningKey ?? (() => {}), now);
    const alertsWritten = options.alertsWritten ?? (() => {});
    const desk = new Desk({
      ledger: options.ledger,
      now,
      log,
      upstreamTimeoutMs,
      catalog,
      registry,
      signing,
      alertsWritten,
      unsettled: new UnsettledCalls(),
      approver: options.approver ?? null,
    });
    await signing.publish();
    await registry.openStored();
    await catalog.reload();
    return desk;
  }

  now(): number {
    return this.#d.now();
  }

  get upstreamTimeoutMs(): number {
    return this.#d.upstreamTimeoutMs;
  }

  // --- agents ---------------------------------------------------------------------------------

  /** The clearing path (clearing.ts); `call` carries the approval a repeat names and the agent's disconnect. */
  clear(keySecret: string | null, toolName: string, args: unknown, call: ClearingCall = {}): Promise<ClearingOutcome> {
    return clear(this.#d, keySecret, toolName, args, call);
  }

  /** The key a secret opens now, or null (unknown, revoked, expired, malformed). */
  validKey(secret: string | null): Promise<DeskKey | null> {
    return validKey(this.#d, secret, this.#d.now());
  }

  allowedTools(key: DeskKey): { tool: ToolEntry; priceMc: number }[] {
    return allowedTools(this.#d, key);
  }

  budgetOf(key: DeskKey): { period: string; spentMc: number; remainingMc: number } {
    return keys.budgetOf(key, this.#d.now());
  }

  receiptFor(id: string, reader: receipts.Reader): Promise<ReceiptRecord | null> {
    return receipts.receiptFor(this.#d, id, reader);
  }

  keyReceipts(key: DeskKey, sinceMs: number, limit: number): Promise<{ receipts: ReceiptRecord[]; held: Set<string> }> {
    return receipts.keyReceipts(this.#d, key, sinceMs, limit);
  }

  heldResultFor(key: DeskKey, receiptId: string): Promise<{ result: Record<string, unknown>; receipt: Envelope } | null> {
    return receipts.heldResultFor(this.#d, key, receiptId);
  }

  // --- tools and upstreams --------------------------------------------------------------------

  /** A tool the desk serves now (active, its schemas compiled). */
  tool(name: string): ToolEntry | undefined {
    return this.#d.catalog.tool(name);
  }

  allTools(): ToolEntry[] {
    return this.#d.catalog.all();
  }

  /** Every tool the ledger holds, inactive ones too (the operator's view). */
  toolRecords(): Promise<ToolRecord[]> {
    return this.#d.ledger.catalog.tools();
  }

  /** Sets a tool's price; TOOL_UNKNOWN. The desk charges it from the next call. */
  async priceTool(name: string, priceMc: number, upstreamCostMc: number): Promise<ToolRecord> {
    if (!(await this.#d.ledger.catalog.setPrice(name, priceMc, upstreamCostMc))) throw new WireError("TOOL_UNKNOWN");
    await this.#d.catalog.reload();
    return (await this.#d.ledger.catalog.tool(name))!;
  }

  /** Every upstream with its credential's state. */
  upstreams(): Promise<UpstreamState[]> {
    return this.#d.registry.list();
  }

  addUpstream(spec: UpstreamSpec): Promise<Registered> {
    return this.#d.registry.register(spec);
  }

  refreshUpstream(name: string): Promise<Omit<Registered, keyof UpstreamState>> {
    return this.#d.registry.refresh(name);
  }

  /** Gives an upstream a new credential (or none): a new grant after a refused one. */
  replaceUpstreamAuth(name: string, auth: AuthConfig | null): Promise<UpstreamState> {
    return this.#d.registry.replaceAuth(name, auth);
  }

  // --- organizations and keys -----------------------------------------------------------------

  createOrg(name: string): Promise<Org> {
    return keys.createOrg(this.#d, name);
  }

  orgs(): Promise<Org[]> {
    return this.#d.ledger.orgs.list();
  }

  /** ORG_UNKNOWN, else the org (existingOrg). */
  org(id: string): Promise<Org> {
    return keys.existingOrg(this.#d, id);
  }

  orgBudget(orgId: string): Promise<orgBudgets.OrgBudgetNow | null> {
    return orgBudgets.orgBudget(this.#d, orgId);
  }

  setOrgBudget(orgId: string, budgetMc: number | null, reset: Reset | null): Promise<{ budget: orgBudgets.OrgBudgetNow; record: StoredOrgRecord | null }> {
    return orgBudgets.setOrgBudget(this.#d, orgId, budgetMc, reset);
  }

  topUp(orgId: string, amountMc: number, reference: string): Promise<{ added: boolean; record: StoredOrgRecord; budget: orgBudgets.OrgBudgetNow }> {
    return orgBudgets.topUp(this.#d, orgId, amountMc, reference);
  }

  orgThresholds(orgId: string): Promise<readonly number[]> {
    return orgBudgets.orgThresholds(this.#d, orgId);
  }

  setOrgThresholds(orgId: string, thresholds: readonly number[]): Promise<void> {
    return orgBudgets.setOrgThresholds(this.#d, orgId, thresholds);
  }

  /** The alert outbox, newest first (optionally of one org). */
  alerts(filter: { orgId: string | null; limit: number }): Promise<AlertRecord[]> {
    return this.#d.ledger.alerts.list(filter);
  }

  /** The org's signed statement for a month or a UTC day (statements.ts). */
  statement(orgId: string, period: string): Promise<StatementEnvelope> {
    return statements.statement(this.#d, orgId, period);
  }

  orgRecords(orgId: string): Promise<StoredOrgRecord[]> {
    return orgBudgets.orgRecords(this.#d, orgId);
  }

  createKey(input: keys.NewKeyInput): Promise<{ keyId: string; secret: string }> {
    return keys.createKey(this.#d, input);
  }

  key(id: string): Promise<DeskKey> {
    return keys.existingKey(this.#d, id);
  }

  keys(orgId: string | null): Promise<DeskKey[]> {
    return keys.listKeys(this.#d, orgId);
  }

  patchKey(id: string, patch: KeyPatch): Promise<DeskKey> {
    return keys.patchKey(this.#d, id, patch);
  }

  rotateKey(id: string): Promise<string> {
    return keys.rotateKey(this.#d, id);
  }

  revokeKey(id: string): Promise<DeskKey> {
    return keys.revokeKey(this.#d, id);
  }

  // --- records --------------------------------------------------------------------------------

  audit(filter: AuditFilter): Promise<AuditEntry[]> {
    return receipts.audit(this.#d, filter);
  }

  exportReceipts(filter: { orgId: string | null; sinceMs: number | null }, signal?: AbortSignal): AsyncIterable<Uint8Array> {
    return receipts.exportReceipts(this.#d, filter, signal);
  }

  // --- the sandbox ----------------------------------------------------------------------------

  sandbox(): Promise<SandboxSettings | null> {
    return sandbox.sandboxSettings(this.#d);
  }

  setSandbox(input: Parameters<typeof sandbox.setSandbox>[1]): Promise<SandboxSettings> {
    return sandbox.setSandbox(this.#d, input);
  }

  clearSandbox(): Promise<void> {
    return sandbox.clearSandbox(this.#d);
  }

  grantSandboxKey(address: string | null): Promise<sandbox.SandboxKey> {
    return sandbox.grantSandboxKey(this.#d, address);
  }

  // --- signing and recovery -------------------------------------------------------------------

  get signer(): ReceiptSigner {
    return this.#d.signing.current;
  }

  /** Signs receipts with `make` as the clearing path does (tests and benchmarks drive the ledger with it). */
  receiptMaker(): { make: ReceiptMaker; last: () => Envelope | null } {
    return this.#d.signing.receiptMaker();
  }

  /** Switches to a new signing key; the old one stays in the key set as retired. */
  rotateSigner(): Promise<{ kid: string; retiredKid: string }> {
    return this.#d.signing.rotate();
  }

  jwks(): Promise<Jwks> {
    return this.#d.signing.jwks();
  }

  sweepAbandoned(beforeMs: number): Promise<number> {
    return sweepAbandoned(this.#d, beforeMs);
  }

  sweepStale(): Promise<number> {
    return sweepStale(this.#d);
  }

  /** Settles the reservations whose approval can no longer be used (recovery.ts). */
  sweepApprovals(): Promise<number> {
    return sweepApprovals(this.#d);
  }

  /**
   * Reloads the catalog when another desk sharing the ledger changed an upstream, a tool or a
   * price (the stamp moved), opening any upstream it registered first. Whether it reloaded.
   */
  async refreshCatalog(): Promise<boolean> {
    if (!(await this.#d.catalog.changed())) return false;
    await this.#d.registry.openStored();
    await this.#d.catalog.reload();
    return true;
  }

  /** Settles again the calls whose settlement the ledger left unknown (unsettled.ts); how many were resolved. */
  resolveUnsettled(): Promise<number> {
    return this.#d.unsettled.size === 0 ? Promise.resolve(0) : this.#d.unsettled.resolve(this.#d);
  }

  /** Whether the desk can take calls now (GET /healthz): its ledger reachable and, with several nodes, its lease held. */
  healthy(): Promise<boolean> {
    return this.#d.ledger.healthy();
  }

  async close(): Promise<void> {
    await this.#d.registry.close();
  }
}
