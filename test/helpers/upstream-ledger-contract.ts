// The ledger's part of REST upstreams and upstream credentials (CatalogStore and
// CredentialStores of core/desk/ports.ts), for every DeskLedger adapter: the SQLite ledger today,
// the PostgreSQL ledger when it implements the port. Call it with a factory of an empty ledger.
import { describe, expect, test } from "bun:test";
import { LedgerConflict, type DeskLedger } from "../../src/core/desk/ports.ts";
import type { NewUpstream, ToolListing } from "../../src/core/desk/records.ts";
import type { RestOperation } from "../../src/core/rest/operation.ts";
import { type LedgerUnderTest, onLedger } from "./ledger-contract.ts";

const OPERATION: RestOperation = {
  method: "get",
  path: "/items/{id}",
  parameters: [{ name: "id", in: "path", arg: "id", required: true, style: "simple", explode: false }],
  accept: "application/json",
};

const restTool = (name: string, operation: RestOperation | null = OPERATION): ToolListing => ({
  name: `api__${name}`,
  upstreamTool: name,
  description: name,
  inputSchema: { type: "object" },
  listing: {},
  operation,
});

const restUpstream = (over: Partial<NewUpstream> = {}): NewUpstream => ({
  name: "api",
  kind: "rest",
  url: "https://api.example/v1",
  auth: { type: "bearer" },
  document: { inline: { openapi: "3.1.0", info: { title: "t", version: "1" }, paths: {} } },
  sealedFields: { token: "sealed-token-blob" },
  now: 1_795_000_000_000,
  ...over,
});

export function describeUpstreamLedgerContract(name: string, make: () => Promise<LedgerUnderTest> | LedgerUnderTest): void {
  describe(`upstream ledger contract: ${name}`, () => {
    const withLedger = (run: (l: DeskLedger) => Promise<void>) => onLedger(make, run);

    test("a REST upstream is stored with its kind, settings, document source, tools' operations and sealed fields", () =>
      withLedger(async (l) => {
        await l.catalog.addUpstream(restUpstream(), [restTool("getItem"), restTool("other")]);
        expect(await l.catalog.upstream("api")).toEqual({
          name: "api",
          kind: "rest",
          url: "https://api.example/v1",
          sealedHeaders: null,
          headerNames: [],
          auth: { type: "bearer" },
          document: { inline: true },
          createdAt: 1_795_000_000_000,
          refreshedAt: 1_795_000_000_000,
        });
        expect(await l.catalog.storedDocument("api")).toEqual({ openapi: "3.1.0", info: { title: "t", version: "1" }, paths: {} });
        expect((await l.catalog.tool("api__getItem"))!.operation).toEqual(OPERATION);
        expect(await l.credentials.of("api").load()).toEqual({ token: "sealed-token-blob" });
        // Another upstream's store is its own.
        expect(await l.credentials.of("other").load()).toEqual({});
      }));

    test("a document given by URL is stored as its URL; an MCP upstream has no document and no operations", () =>
      withLedger(async (l) => {
        await l.catalog.addUpstream(restUpstream({ document: { url: "https://api.example/openapi.json" }, auth: null, sealedFields: {} }), [restTool("a")]);
        await l.catalog.addUpstream({ name: "mcp", kind: "mcp", url: "https://mcp.example/mcp", auth: null, document: null, sealedFields: {}, now: 1 }, [
          { ...restTool("echo", null), name: "mcp__echo" },
        ]);
        expect(await l.catalog.upstream("api")).toMatchObject({ document: { url: "https://api.example/openapi.json" }, auth: null });
        expect(await l.catalog.storedDocument("api")).toBeNull();
        expect(await l.catalog.upstream("mcp")).toMatchObject({ kind: "mcp", document: null });
        expect((await l.catalog.tool("mcp__echo"))!.operation).toBeNull();
      }));

    test("a taken name is EXISTS and changes nothing, also its sealed fields", () =>
      withLedger(async (l) => {
        await l.catalog.addUpstream(restUpstream(), [restTool("getItem")]);
        const again = l.catalog.addUpstream(restUpstream({ sealedFields: { token: "another" } }), [restTool("x")]);
        await expect(again).rejects.toBeInstanceOf(LedgerConflict);
        await expect(again).rejects.toMatchObject({ code: "EXISTS" });
        expect(await l.credentials.of("api").load()).toEqual({ token: "sealed-token-blob" });
        expect(await l.catalog.tool("api__x")).toBeNull();
      }));

    test("a refresh replaces the operations and keeps prices", () =>
      withLedger(async (l) => {
        await l.catalog.addUpstream(restUpstream(), [restTool("getItem")]);
        await l.catalog.setPrice("api__getItem", 7, 1);
        const moved: RestOperation = { ...OPERATION, path: "/v2/items/{id}" };
        await l.catalog.refreshTools("api", [restTool("getItem", moved), restTool("ping")], 2);
        expect(await l.catalog.tool("api__getItem")).toMatchObject({ operation: moved, priceMc: 7, active: true });
        expect(await l.catalog.tool("api__ping")).toMatchObject({ active: true });
      }));

    test("save sets and deletes fields together; load reads them back", () =>
      withLedger(async (l) => {
        await l.catalog.addUpstream(restUpstream({ sealedFields: { refresh_token: "r1", client_secret: "c" } }), []);
        const store = l.credentials.of("api");
        await store.save({ refresh_token: "r2", access_token: "a1" });
        expect(await store.load()).toEqual({ refresh_token: "r2", client_secret: "c", access_token: "a1" });
        await store.save({ access_token: null, grant: "refused" });
        expect(await store.load()).toEqual({ refresh_token: "r2", client_secret: "c", grant: "refused" });
      }));

    test("replace swaps the settings and every field in one step; MISSING for no such upstream", () =>
      withLedger(async (l) => {
        await l.catalog.addUpstream(restUpstream({ sealedFields: { token: "t", grant: "refused" } }), []);
        await l.credentials.replace("api", { type: "basic" }, { username: "u", password: "p" });
        expect((await l.catalog.upstream("api"))!.auth).toEqual({ type: "basic" });
        expect(await l.credentials.of("api").load()).toEqual({ username: "u", password: "p" });
        await l.credentials.replace("api", null, {});
        expect((await l.catalog.upstream("api"))!.auth).toBeNull();
        expect(await l.credentials.of("api").load()).toEqual({});
        await expect(l.credentials.replace("nope", null, {})).rejects.toMatchObject({ code: "MISSING" });
      }));
  });
}
