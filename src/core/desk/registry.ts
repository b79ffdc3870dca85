// The upstreams the desk speaks to: one open upstream per registered one, opened through its
// kind's connector (ports.ts) with its credential. Registering reads every tool before anything
// is stored (an MCP upstream lists them; a REST upstream's come from its OpenAPI document), so a
// registered upstream always has the tools it really serves. Each kind's registration is one
// entry of KINDS below: where its tools come from, and what is stored to find them again.
import { WireError } from "../errors.ts";
import { DocumentRefused } from "../rest/refused.ts";
import type { SkippedOperation } from "../rest/tools.ts";
import { type AuthConfig, type AuthSettings, settingsOf } from "../upstream/auth-config.ts";
import { type Credential, type CredentialState, CredentialUnavailable, ReplaceableCredential } from "../upstream/credential.ts";
import { type CredentialStore, sealCredential, StagedCredentialStore } from "../upstream/credential-store.ts";
import type { UpstreamTool } from "../upstream/outcome.ts";
import { compileArgsSchema, SchemaRefused } from "./args.ts";
import { type Catalog, compileOutputSchema } from "./catalog.ts";
import { isLinkLocalOrUnspecified } from "./network.ts";
import {
  type CatalogStore,
  type Clock,
  type CredentialOpener,
  type CredentialStores,
  LedgerConflict,
  type Log,
  type Upstream,
  type UpstreamConnectors,
} from "./ports.ts";
import type { NewUpstream, ToolListing, UpstreamKind, UpstreamRecord } from "./records.ts";
import { type SealingKey, unseal } from "./seal.ts";

/** Upstream tool names the desk registers (MCP's recommended form). */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Sealed headers that do not open: another sealing key, or an altered row. */
export class SealedHeadersError extends Error {
  override name = "SealedHeadersError";
  constructor(readonly upstream: string) {
    super(`the sealed headers of upstream ${upstream} do not open`);
  }
}

/** An operator's registration, by kind (the admin API reads the body into one of these). */
export type UpstreamSpec =
  | { kind: "mcp"; name: string; url: URL; auth: AuthConfig | null }
  | { kind: "rest"; name: string; url: URL; document: { inline: Record<string, unknown> } | { url: URL }; auth: AuthConfig | null };

/** An upstream as the operator sees it: its record and its credential's state (null without one). */
export type UpstreamState = { record: UpstreamRecord; credential: CredentialState | null };

export type Registered = UpstreamState & { tools: string[]; skipped: SkippedOperation[] };

export type RegistryOptions = {
  store: CatalogStore;
  credentials: CredentialStores;
  catalog: Catalog;
  connectors: UpstreamConnectors;
  openCredential: CredentialOpener;
  sealingKey: SealingKey;
  timeoutMs: number;
  /** Link-local or unspecified upstream hosts the operator allows (--allow-upstream-host), as URL hostnames. */
  allowHosts: ReadonlySet<string>;
  now: Clock;
  log: Log;
};

/** `refreshedAt`: the record's, when this client was built from its tools. */
type Opened = { upstream: Upstream; credential: ReplaceableCredential; refreshedAt: number };

/** A REST document's tools, as the ledger stores them, and the operations left out. */
type DocumentListing = { tools: ToolListing[]; skipped: SkippedOperation[] };

export class UpstreamRegistry {
  private readonly open = new Map<string, Opened>();

  constructor(private readonly o: RegistryOptions) {}

  /**
   * Opens every stored upstream not open as stored: all of them at start-up; later, those another
   * desk sharing the ledger registered or refreshed (a REST client is built from its tools).
   * SealedHeadersError, or SealedFieldError (naming the upstream and the field), when a
   * credential does not open under this sealing key.
   */
  async openStored(): Promise<void> {
    const tools = await this.o.store.tools();
    for (let record of await this.o.store.upstreams()) {
      const opened = this.open.get(record.name);
      if (opened !== undefined && opened.refreshedAt === record.refreshedAt) continue;
      if (record.sealedHeaders !== null) record = await this.moveSealedHeaders(record);
      const credential = opened?.credential ?? new ReplaceableCredential(await this.credentialOf(record.name, record.auth));
      const stored = tools.filter((t) => t.upstream === record.name && t.active);
      const upstream = this.connect(record.kind, record.name, new URL(record.url), credential, stored);
      this.open.set(record.name, { upstream, credential, refreshedAt: record.refreshedAt });
      await opened?.upstream.close();
    }
  }

  upstream(name: string): Upstream | undefined {
    return this.open.get(name)?.upstream;
  }

  async list(): Promise<UpstreamState[]> {
    return (await this.o.store.upstreams()).map((record) => this.stateOf(record));
  }

  /**
   * UPSTREAM_HOST_REFUSED, UPSTREAM_EXISTS, UPSTREAM_UNREACHABLE, UPSTREAM_AUTH_FAILED,
   * UPSTREAM_DOCUMENT_REFUSED or UPSTREAM_SCHEMA_REFUSED; else the upstream with the tools it serves.
   */
  async register(spec: UpstreamSpec): Promise<Registered> {
    this.refuseHosts([spec.url, ...(spec.kind === "rest" && "url" in spec.document ? [spec.document.url] : []), ...tokenUrls(spec.auth)]);
    if ((await this.o.store.upstream(spec.name)) !== null) throw new WireError("UPSTREAM_EXISTS");
    const settings = spec.auth === null ? null : settingsOf(spec.auth);
    // The upstream's row does not exist yet: a token got while listing its tools is held here
    // and stored with the upstream, in the same transaction.
    const staged = new StagedCredentialStore(spec.auth === null ? {} : await sealCredential(this.o.sealingKey, spec.name, spec.auth));
    const credential = new ReplaceableCredential(await this.openCredentialWith(spec.name, settings, staged));

    let listing: DocumentListing;
    let upstream: Upstream;
    if (spec.kind === "mcp") {
      upstream = this.connect("mcp", spec.name, spec.url, credential, []);
      listing = { tools: await this.closingOnFailure(upstream, () => this.listOrThrow(upstream)), skipped: [] };
    } else {
      const fromDocument = await this.documentTools(spec.name, "inline" in spec.document ? spec.document.inline : await this.fetchDocument(spec.document.url));
      upstream = this.connect("rest", spec.name, spec.url, credential, fromDocument.tools);
      listing = { tools: await this.closingOnFailure(upstream, () => this.listOrThrow(upstream)), skipped: fromDocument.skipped };
    }

    const { fields, mark } = staged.snapshot();
    const document = spec.kind === "rest" ? ("inline" in spec.document ? { inline: spec.document.inline } : { url: spec.document.url.href }) : null;
    const record: NewUpstream = { name: spec.name, kind: spec.kind, url: spec.url.href, auth: settings, document, sealedFields: fields, now: this.o.now() };
    try {
      await this.o.store.addUpstream(record, listing.tools);
    } catch (err) {
      await upstream.close();
      if (err instanceof LedgerConflict && err.code === "EXISTS") throw new WireError("UPSTREAM_EXISTS");
      throw err;
    }
    await staged.attach(this.o.credentials.of(spec.name), mark);
    this.open.set(spec.name, { upstream, credential, refreshedAt: record.now });
    await this.o.catalog.reload();
    const stored = (await this.o.store.upstream(spec.name))!;
    return { ...this.stateOf(stored), tools: listing.tools.map((t) => t.name), skipped: listing.skipped };
  }

  /** Re-reads an upstream's tools (an MCP upstream's list, a REST upstream's document); UPSTREAM_UNKNOWN, or the failures of register. */
  async refresh(name: string): Promise<{ tools: string[]; skipped: SkippedOperation[] }> {
    const opened = this.open.get(name);
    const record = await this.o.store.upstream(name);
    if (opened === undefined || record === null) throw new WireError("UPSTREAM_UNKNOWN");
    const now = this.o.now();
    if (record.kind === "mcp") {
      const tools = await this.listOrThrow(opened.upstream);
      await this.o.store.refreshTools(name, tools, now);
      opened.refreshedAt = now;
      await this.o.catalog.reload();
      return { tools: tools.map((t) => t.name), skipped: [] };
    }
    const source =
      record.document !== null && "url" in record.document ? await this.fetchDocument(new URL(record.document.url)) : await this.o.store.storedDocument(name);
    const fromDocument = await this.documentTools(name, source);
    const upstream = this.connect("rest", name, new URL(record.url), opened.credential, fromDocument.tools);
    const tools = await this.listOrThrow(upstream);
    await this.o.store.refreshTools(name, tools, now);
    // Calls in flight finish on the client they started on; the next ones use the new tools.
    this.open.set(name, { upstream, credential: opened.credential, refreshedAt: now });
    await opened.upstream.close();
    await this.o.catalog.reload();
    return { tools: tools.map((t) => t.name), skipped: fromDocument.skipped };
  }

  /**
   * Replaces an upstream's credential (null: none) in one durable write: every old field goes
   * (tokens, a refused grant's state), the new secrets are sealed, and the next call carries the
   * new credential. UPSTREAM_UNKNOWN, UPSTREAM_HOST_REFUSED for its token URL.
   */
  async replaceAuth(name: string, auth: AuthConfig | null): Promise<UpstreamState> {
    const opened = this.open.get(name);
    if (opened === undefined) throw new WireError("UPSTREAM_UNKNOWN");
    this.refuseHosts(tokenUrls(auth));
    const settings = auth === null ? null : settingsOf(auth);
    try {
      await this.o.credentials.replace(name, settings, auth === null ? {} : await sealCredential(this.o.sealingKey, name, auth));
    } catch (err) {
      if (err instanceof LedgerConflict && err.code === "MISSING") throw new WireError("UPSTREAM_UNKNOWN");
      throw err;
    }
    opened.credential.replace(await this.credentialOf(name, settings));
    return this.stateOf((await this.o.store.upstream(name))!);
  }

  async close(): Promise<void> {
    await Promise.all([...this.open.values()].map((u) => u.upstream.close()));
    this.open.clear();
  }

  private async closingOnFailure<T>(upstream: Upstream, step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      await upstream.close();
      throw err;
    }
  }

  private stateOf(record: UpstreamRecord): UpstreamState {
    return { record, credential: record.auth === null ? null : (this.open.get(record.name)?.credential.state() ?? null) };
  }

  private connect(kind: UpstreamKind, name: string, url: URL, credential: Credential, tools: readonly ToolListing[]): Upstream {
    return this.o.connectors[kind].open({ name, url, credential, timeoutMs: this.o.timeoutMs, tools });
  }

  /** A stored upstream's credential, from its settings and its ledger store. */
  private credentialOf(name: string, settings: AuthSettings | null): Promise<Credential> {
    return this.openCredentialWith(name, settings, this.o.credentials.of(name));
  }

  private openCredentialWith(name: string, settings: AuthSettings | null, store: CredentialStore): Promise<Credential> {
    return this.o.openCredential({ upstream: name, settings, store, sealingKey: this.o.sealingKey, timeoutMs: this.o.timeoutMs, now: this.o.now });
  }

  /**
   * Sealed headers of a desk older than upstream credentials become a `header` credential, in
   * one durable write (the headers' blob goes; each value is sealed as its own field).
   */
  private async moveSealedHeaders(record: UpstreamRecord): Promise<UpstreamRecord> {
    let headers: Record<string, string>;
    try {
      headers = JSON.parse(await unseal(this.o.sealingKey, record.name, record.sealedHeaders!)) as Record<string, string>;
    } catch {
      throw new SealedHeadersError(record.name);
    }
    const auth: AuthConfig = { type: "header", headers };
    await this.o.credentials.replace(record.name, settingsOf(auth), await sealCredential(this.o.sealingKey, record.name, auth));
    this.o.log(`upstream ${record.name}: its sealed headers are now a header credential`);
    return { ...record, sealedHeaders: null, headerNames: [], auth: settingsOf(auth) };
  }

  /** A link-local address is where clouds serve instance metadata and credentials, and an unspecified one reaches this host. */
  private refuseHosts(urls: readonly URL[]): void {
    for (const url of urls) {
      if (isLinkLocalOrUnspecified(url.hostname) && !this.o.allowHosts.has(url.hostname)) throw new WireError("UPSTREAM_HOST_REFUSED");
    }
  }

  private async fetchDocument(url: URL): Promise<unknown> {
    try {
      return await this.o.connectors.rest.fetchDocument(url, this.o.timeoutMs);
    } catch (err) {
      throw documentFailure(err);
    }
  }

  /** The tools of a REST upstream's document. The OpenAPI parser is loaded here, on first use only. */
  private async documentTools(upstream: string, document: unknown): Promise<DocumentListing> {
    const { toolsFromOpenApi } = await import("../rest/tools.ts");
    try {
      const { tools, skipped } = await toolsFromOpenApi(upstream, document);
      const listings = tools.map((t) => ({
        name: `${upstream}__${t.name}`,
        upstreamTool: t.name,
        description: t.description,
        inputSchema: t.inputSchema,
        listing: t.outputSchema === undefined ? {} : { outputSchema: t.outputSchema },
        operation: t.operation,
      }));
      return { tools: listings, skipped };
    } catch (err) {
      throw documentFailure(err);
    }
  }

  private async listOrThrow(upstream: Upstream): Promise<ToolListing[]> {
    let tools: UpstreamTool[];
    try {
      tools = await upstream.listTools();
    } catch (err) {
      this.o.log(`upstream ${upstream.name}: handshake failed (${err instanceof Error ? err.name : "error"})`);
      if (err instanceof CredentialUnavailable && err.kind === "auth_failed") throw new WireError("UPSTREAM_AUTH_FAILED");
      throw new WireError("UPSTREAM_UNREACHABLE");
    }
    return tools.flatMap((t) => {
      // A name outside MCP's recommended alphabet and length could not be a receipt's tool field
      // (or would be ambiguous in a URL path): such a tool is left out.
      if (!TOOL_NAME.test(t.name)) {
        this.o.log(`upstream ${upstream.name}: left out a tool whose name is not 1-128 of [A-Za-z0-9_.-]`);
        return [];
      }
      // A schema no validator can compile would let any argument through, and one with a
      // pattern RE2 cannot run could not be checked in linear time: refuse the upstream.
      this.refuseUncompilable(upstream.name, t.name, "input", () => compileArgsSchema(t.inputSchema));
      // Agents are shown the output schema and check answers against it: it must compile too.
      this.refuseUncompilable(upstream.name, t.name, "output", () => compileOutputSchema(t.listing));
      return [
        {
          name: `${upstream.name}__${t.name}`,
          upstreamTool: t.name,
          description: t.description,
          inputSchema: t.inputSchema,
          listing: t.listing,
          operation: t.operation ?? null,
        },
      ];
    });
  }

  private refuseUncompilable(upstream: string, tool: string, which: "input" | "output", compile: () => unknown): void {
    try {
      compile();
    } catch (err) {
      if (!(err instanceof SchemaRefused)) throw err;
      this.o.log(`upstream ${upstream}: tool ${tool}: ${which} schema refused: ${err.message}`);
      throw new WireError("UPSTREAM_SCHEMA_REFUSED", { tool, reason: err.reason });
    }
  }
}

/** The token URL of an OAuth credential: the desk connects there too. */
function tokenUrls(auth: AuthConfig | null): URL[] {
  return auth !== null && (auth.type === "oauth2_client_credentials" || auth.type === "oauth2_refresh_token") ? [new URL(auth.token_url)] : [];
}

/** A refused document as the operator is told: what is wrong with it, or that openapi_url gave no answer. */
function documentFailure(err: unknown): unknown {
  if (!(err instanceof DocumentRefused)) return err;
  return new WireError(err.unreachable ? "UPSTREAM_UNREACHABLE" : "UPSTREAM_DOCUMENT_REFUSED", { problems: err.problems });
}
