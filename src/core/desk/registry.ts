// The upstreams the desk speaks to: one open upstream per registered one, opened through its
// kind's connector (ports.ts) with its credential headers unsealed. Registering lists every tool
// before anything is stored, so a registered upstream always has the tools it really serves.
import { WireError } from "../errors.ts";
import { compileArgsSchema, SchemaRefused } from "./args.ts";
import { type Catalog, compileOutputSchema } from "./catalog.ts";
import { isLinkLocalOrUnspecified } from "./network.ts";
import type { UpstreamTool } from "../upstream/outcome.ts";
import { type CatalogStore, type Clock, LedgerConflict, type Log, type Upstream, type UpstreamConnectors } from "./ports.ts";
import type { ToolListing, UpstreamRecord } from "./records.ts";
import { type SealingKey, seal, unseal } from "./seal.ts";

/** Upstream tool names the desk registers (MCP's recommended form). */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Sealed headers that do not open: another sealing key, or an altered row. */
export class SealedHeadersError extends Error {
  override name = "SealedHeadersError";
  constructor(readonly upstream: string) {
    super(`the sealed headers of upstream ${upstream} do not open`);
  }
}

export type RegistryOptions = {
  store: CatalogStore;
  catalog: Catalog;
  connectors: UpstreamConnectors;
  sealingKey: SealingKey;
  timeoutMs: number;
  /** Link-local or unspecified upstream hosts the operator allows (--allow-upstream-host), as URL hostnames. */
  allowHosts: ReadonlySet<string>;
  now: Clock;
  log: Log;
};

export class UpstreamRegistry {
  private readonly open = new Map<string, Upstream>();

  constructor(private readonly o: RegistryOptions) {}

  /**
   * Opens every stored upstream not open yet (all of them at start-up; later, those another desk
   * sharing the ledger registered); SealedHeadersError when a credential does not open.
   */
  async openStored(): Promise<void> {
    for (const record of await this.o.store.upstreams()) {
      if (this.open.has(record.name)) continue;
      let headers: Record<string, string> = {};
      try {
        if (record.sealedHeaders !== null) headers = JSON.parse(await unseal(this.o.sealingKey, record.name, record.sealedHeaders)) as Record<string, string>;
      } catch {
        throw new SealedHeadersError(record.name);
      }
      this.open.set(record.name, this.connect(record.kind, record.name, new URL(record.url), headers));
    }
  }

  upstream(name: string): Upstream | undefined {
    return this.open.get(name);
  }

  list(): Promise<UpstreamRecord[]> {
    return this.o.store.upstreams();
  }

  /** UPSTREAM_HOST_REFUSED, UPSTREAM_EXISTS, UPSTREAM_UNREACHABLE or UPSTREAM_SCHEMA_REFUSED, else the tools now served. */
  async register(name: string, url: URL, headers: Record<string, string>): Promise<{ tools: string[] }> {
    // A link-local address is where clouds serve instance metadata and credentials, and an
    // unspecified one reaches this host: neither is an upstream unless the operator names it.
    if (isLinkLocalOrUnspecified(url.hostname) && !this.o.allowHosts.has(url.hostname)) throw new WireError("UPSTREAM_HOST_REFUSED");
    if ((await this.o.store.upstream(name)) !== null) throw new WireError("UPSTREAM_EXISTS");
    const upstream = this.connect("mcp", name, url, headers);
    const tools = await this.listOrThrow(upstream);
    const sealed = Object.keys(headers).length === 0 ? null : await seal(this.o.sealingKey, name, JSON.stringify(headers));
    try {
      await this.o.store.addUpstream({ name, kind: "mcp", url: url.href, sealedHeaders: sealed, headerNames: Object.keys(headers), now: this.o.now() }, tools);
    } catch (err) {
      await upstream.close();
      if (err instanceof LedgerConflict && err.code === "EXISTS") throw new WireError("UPSTREAM_EXISTS");
      throw err;
    }
    this.open.set(name, upstream);
    await this.o.catalog.reload();
    return { tools: tools.map((t) => t.name) };
  }

  /** Re-reads an upstream's tools; UPSTREAM_UNKNOWN, or the failures of register. */
  async refresh(name: string): Promise<{ tools: string[] }> {
    const upstream = this.open.get(name);
    if (!upstream) throw new WireError("UPSTREAM_UNKNOWN");
    const tools = await this.listOrThrow(upstream);
    await this.o.store.refreshTools(name, tools, this.o.now());
    await this.o.catalog.reload();
    return { tools: tools.map((t) => t.name) };
  }

  async close(): Promise<void> {
    await Promise.all([...this.open.values()].map((u) => u.close()));
    this.open.clear();
  }

  private connect(kind: UpstreamRecord["kind"], name: string, url: URL, headers: Record<string, string>): Upstream {
    return this.o.connectors[kind].open({ name, url, headers, timeoutMs: this.o.timeoutMs });
  }

  private async listOrThrow(upstream: Upstream): Promise<ToolListing[]> {
    let tools: UpstreamTool[];
    try {
      tools = await upstream.listTools();
    } catch (err) {
      this.o.log(`upstream ${upstream.name}: handshake failed (${err instanceof Error ? err.name : "error"})`);
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
      return [{ name: `${upstream.name}__${t.name}`, upstreamTool: t.name, description: t.description, inputSchema: t.inputSchema, listing: t.listing }];
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
