// The desk as one object: the ledger, the receipt signer, the sealing key, the registered tools
// (schemas compiled once) and one MCP client per upstream. The HTTP handler and the clearing
// path are built on it; tests build it in-process, the binary builds it from its data dir.
import { type ArgsCheck, compileArgsSchema, SchemaRefused } from "./args.ts";
import { WireError } from "../errors.ts";
import { isLinkLocalOrUnspecified } from "./network.ts";
import { statusOf } from "./outcomes.ts";
import { hourOf } from "./period.ts";
import { type SealingKey, seal, unseal } from "./seal.ts";
import { type DeskLedger, type ReceiptMaker, type ToolRow, DeskLedgerError } from "../../adapters/sqlite/desk/ledger.ts";
import { receiptMakerFor } from "./receipt-maker.ts";
import { type Envelope, generateSigningKey, type Jwks, jwksOf, loadSigner, type ReceiptJwk, type ReceiptSigner } from "../receipt/index.ts";
import { type UpstreamTool, UpstreamClient } from "../../adapters/mcp-upstream/client.ts";

/** Time the sweep gives a call beyond the upstream timeout before its reservation counts as abandoned. */
export const ABANDON_MARGIN_MS = 10_000;
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000;
/** Upstream tool names the desk registers (MCP's recommended form). */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

export type Clock = () => number;

export type DeskOptions = {
  ledger: DeskLedger;
  signer: ReceiptSigner;
  sealingKey: SealingKey;
  now?: Clock;
  upstreamTimeoutMs?: number;
  /** Writes one log line (never a secret); defaults to nothing. */
  log?: (line: string) => void;
  /** Stores a new signing key (PKCS#8 PEM) before the desk signs with it; the binary writes its data dir. */
  storeSigningKey?: (privatePem: string) => void;
  /** Link-local or unspecified upstream hosts the operator allows (--allow-upstream-host), as URL hostnames. */
  allowUpstreamHosts?: readonly string[];
};

export type ToolEntry = {
  row: ToolRow;
  check: ArgsCheck;
  schema: Record<string, unknown>;
  /** The upstream's listed fields agents see unchanged (LISTED_FIELDS of upstream.ts), parsed once. */
  listing: Record<string, unknown>;
  /** The listed outputSchema compiled, or null when the tool declares none. */
  checkOutput: ArgsCheck | null;
};

/** A tool's listed outputSchema compiled (as input schemas are), or null when it lists none. */
function compileOutputSchema(listing: Record<string, unknown>): ArgsCheck | null {
  return Object.hasOwn(listing, "outputSchema") ? compileArgsSchema(listing.outputSchema) : null;
}

/** Sealed headers that do not open: another sealing key, or an altered row. */
export class SealedHeadersError extends Error {
  override name = "SealedHeadersError";
  constructor(readonly upstream: string) {
    super(`the sealed headers of upstream ${upstream} do not open`);
  }
}

export class Desk {
  readonly ledger: DeskLedger;
  readonly now: Clock;
  readonly upstreamTimeoutMs: number;
  readonly log: (line: string) => void;
  private signerNow: ReceiptSigner;
  private readonly sealingKey: SealingKey;
  private readonly storeSigningKey: (privatePem: string) => void;
  private readonly allowUpstreamHosts: ReadonlySet<string>;
  private readonly clients = new Map<string, UpstreamClient>();
  private tools = new Map<string, ToolEntry>();

  private constructor(options: DeskOptions) {
    this.ledger = options.ledger;
    this.signerNow = options.signer;
    this.sealingKey = options.sealingKey;
    this.now = options.now ?? Date.now;
    this.upstreamTimeoutMs = options.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS;
    this.log = options.log ?? (() => {});
    this.storeSigningKey = options.storeSigningKey ?? (() => {});
    this.allowUpstreamHosts = new Set(options.allowUpstreamHosts ?? []);
  }

  /** Builds the desk: publishes the signer's key, opens sealed headers, compiles every schema. */
  static async open(options: DeskOptions): Promise<Desk> {
    const desk = new Desk(options);
    desk.ledger.addSigningKey(desk.signerNow.kid, JSON.stringify(desk.signerNow.publicJwk()), desk.now());
    for (const row of desk.ledger.listUpstreams()) {
      let headers: Record<string, string> = {};
      try {
        if (row.sealed_headers !== null) headers = JSON.parse(await unseal(desk.sealingKey, row.name, row.sealed_headers)) as Record<string, string>;
      } catch {
        throw new SealedHeadersError(row.name);
      }
      desk.clients.set(row.name, new UpstreamClient(row.name, new URL(row.url), headers, desk.upstreamTimeoutMs));
    }
    desk.reloadTools();
    return desk;
  }

  get signer(): ReceiptSigner {
    return this.signerNow;
  }

  /** Re-reads tools and prices into memory; schemas are compiled here, never per call. */
  reloadTools(): void {
    const next = new Map<string, ToolEntry>();
    for (const row of this.ledger.listTools()) {
      if (row.active !== 1) continue;
      const previous = this.tools.get(row.name);
      try {
        const sameListing = previous?.row.listing === row.listing;
        const listing = sameListing ? previous!.listing : (JSON.parse(row.listing) as Record<string, unknown>);
        const checkOutput = sameListing ? previous!.checkOutput : compileOutputSchema(listing);
        if (previous && previous.row.input_schema === row.input_schema) {
          next.set(row.name, { ...previous, row, listing, checkOutput });
          continue;
        }
        const schema = JSON.parse(row.input_schema) as Record<string, unknown>;
        next.set(row.name, { row, schema, check: compileArgsSchema(schema), listing, checkOutput });
      } catch (err) {
        // Stored before this desk refused such schemas: the tool is not served (unknown to
        // agents) rather than checked by a rule that could stall the desk.
        if (!(err instanceof SchemaRefused)) throw err;
        this.log(`tool ${row.name}: not served: its schema is refused (${err.message}); refresh its upstream once it changes`);
      }
    }
    this.tools = next;
  }

  tool(name: string): ToolEntry | undefined {
    return this.tools.get(name);
  }

  allTools(): ToolEntry[] {
    return [...this.tools.values()];
  }

  client(upstream: string): UpstreamClient | undefined {
    return this.clients.get(upstream);
  }

  /**
   * Registers an upstream: the MCP handshake and every page of tools/list happen before
   * anything is stored, so a registered upstream always has the tools it really serves.
   */
  async addUpstream(name: string, url: URL, headers: Record<string, string>): Promise<{ tools: string[] }> {
    // A link-local address is where clouds serve instance metadata and credentials, and an
    // unspecified one reaches this host: neither is an upstream unless the operator names it.
    if (isLinkLocalOrUnspecified(url.hostname) && !this.allowUpstreamHosts.has(url.hostname)) throw new WireError("UPSTREAM_HOST_REFUSED");
    if (this.ledger.getUpstream(name) !== null) throw new WireError("UPSTREAM_EXISTS");
    const client = new UpstreamClient(name, url, headers, this.upstreamTimeoutMs);
    const listed = await this.listOrThrow(client);
    const sealed = Object.keys(headers).length === 0 ? null : await seal(this.sealingKey, name, JSON.stringify(headers));
    try {
      this.ledger.addUpstream({ name, url: url.href, sealedHeaders: sealed, headerNames: Object.keys(headers), now: this.now() }, listed.rows);
    } catch (err) {
      await client.close();
      if (err instanceof DeskLedgerError && err.code === "EXISTS") throw new WireError("UPSTREAM_EXISTS");
      throw err;
    }
    this.clients.set(name, client);
    this.reloadTools();
    return { tools: listed.rows.map((r) => r.name) };
  }

  async refreshUpstream(name: string): Promise<{ tools: string[] }> {
    const client = this.clients.get(name);
    if (!client) throw new WireError("UPSTREAM_UNKNOWN");
    const listed = await this.listOrThrow(client);
    this.ledger.refreshTools(name, listed.rows, this.now());
    this.reloadTools();
    return { tools: listed.rows.map((r) => r.name) };
  }

  private async listOrThrow(client: UpstreamClient) {
    let tools: UpstreamTool[];
    try {
      tools = await client.listTools();
    } catch (err) {
      this.log(`upstream ${client.name}: handshake failed (${err instanceof Error ? err.name : "error"})`);
      throw new WireError("UPSTREAM_UNREACHABLE");
    }
    const rows = tools.flatMap((t) => {
      // A name outside MCP's recommended alphabet and length could not be a receipt's tool field
      // (or would be ambiguous in a URL path): such a tool is left out.
      if (!TOOL_NAME.test(t.name)) {
        this.log(`upstream ${client.name}: left out a tool whose name is not 1-128 of [A-Za-z0-9_.-]`);
        return [];
      }
      // A schema no validator can compile would let any argument through, and one with a
      // pattern RE2 cannot run could not be checked in linear time: refuse the upstream.
      try {
        compileArgsSchema(t.inputSchema);
      } catch (err) {
        if (!(err instanceof SchemaRefused)) throw err;
        this.log(`upstream ${client.name}: tool ${t.name}: input schema refused: ${err.message}`);
        throw new WireError("UPSTREAM_SCHEMA_REFUSED", { tool: t.name, reason: err.reason });
      }
      // Agents are shown the output schema and check answers against it: it must compile too.
      try {
        compileOutputSchema(t.listing);
      } catch (err) {
        if (!(err instanceof SchemaRefused)) throw err;
        this.log(`upstream ${client.name}: tool ${t.name}: output schema refused: ${err.message}`);
        throw new WireError("UPSTREAM_SCHEMA_REFUSED", { tool: t.name, reason: err.reason });
      }
      return [
        { name: `${client.name}__${t.name}`, upstreamTool: t.name, description: t.description, inputSchema: JSON.stringify(t.inputSchema), listing: JSON.stringify(t.listing) },
      ];
    });
    return { rows };
  }

  /**
   * A receipt maker bound to the current signer; `last` keeps the envelope it signed so the
   * caller can answer with it without parsing the stored text back.
   */
  receiptMaker(): { make: ReceiptMaker; last: () => Envelope | null } {
    let signed: Envelope | null = null;
    const make = receiptMakerFor(this.signerNow, (envelope) => {
      signed = envelope;
    });
    return { make, last: () => signed };
  }

  /**
   * Refunds reservations still open from before `beforeMs` with a signed `refunded_abandoned`
   * receipt (a desk killed mid-call never charges for an answer nobody received).
   */
  sweepAbandoned(beforeMs: number): number {
    let refunded = 0;
    for (const id of this.ledger.openReservations(beforeMs)) {
      const now = this.now();
      try {
        const result = this.ledger.settle(id, "refunded_abandoned", statusOf("refunded_abandoned"), null, now, hourOf(now), this.receiptMaker().make);
        if (result.kind === "settled") refunded++;
      } catch (err) {
        // One reservation that cannot be settled must not keep the others open.
        this.log(`reservation ${id}: refund failed (${err instanceof Error ? err.name : "error"})`);
      }
    }
    if (refunded > 0) this.log(`refunded ${refunded} abandoned reservation(s)`);
    return refunded;
  }

  /** The sweep the running desk repeats: reservations older than the timeout plus a margin. */
  sweepStale(): number {
    return this.sweepAbandoned(this.now() - this.upstreamTimeoutMs - ABANDON_MARGIN_MS);
  }

  /** Switches to a new signing key; the old one stays in the JWKS as retired. Returns the new kid. */
  rotateSigner(): string {
    const fresh = generateSigningKey();
    const signer = loadSigner(fresh.privatePem);
    this.storeSigningKey(fresh.privatePem);
    this.ledger.addSigningKey(signer.kid, JSON.stringify(signer.publicJwk()), this.now());
    this.signerNow = signer;
    return signer.kid;
  }

  jwks(): Jwks {
    const retired = this.ledger
      .listSigningKeys()
      .filter((k) => k.kid !== this.signerNow.kid)
      .map((k) => JSON.parse(k.public_jwk) as ReceiptJwk);
    return jwksOf(this.signerNow.publicJwk(), retired);
  }

  async close(): Promise<void> {
    await Promise.all([...this.clients.values()].map((c) => c.close()));
    this.clients.clear();
  }
}
