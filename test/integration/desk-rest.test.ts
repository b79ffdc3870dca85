// A REST upstream behind the desk, through the desk's own fetch handler and its /mcp, against a
// real HTTP server described by its own OpenAPI document (test/fixtures/rest-server.ts):
// registration by kind, the status mapping, refusals before any spend with the fixture's request
// log unchanged, path-parameter attacks that reach nothing but the operation's path, refresh, and
// receipts that verify like an MCP tool's.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Jwks, verifyResponse } from "../../src/core/receipt/index.ts";
import { REST_DOCUMENT, type RestFixture, startRestFixture } from "../fixtures/rest-server.ts";
import { makeDesk, type TestDesk } from "./desk-harness.ts";
import { mcpClient, type ServedDesk, serveDesk } from "./desk-mcp-harness.ts";

let fixture: RestFixture;
let t: TestDesk;
let jwks: Jwks;

/** A server that serves one OpenAPI document (which a test may change) and counts every request. */
function documentServer(initial: unknown) {
  let document = initial;
  let requests = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => {
      requests++;
      return Response.json(document);
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/openapi.json`,
    requests: () => requests,
    set: (next: unknown) => {
      document = next;
    },
    stop: () => server.stop(true),
  };
}

const TOOLS = ["rest__getItem", "rest__putItem", "rest__getPart", "rest__search", "rest__status", "rest__redirect", "rest__list", "rest__hang"];

beforeAll(async () => {
  fixture = startRestFixture();
  t = await makeDesk({ upstreamTimeoutMs: 500 });
  const r = await t.admin("POST", "/admin/upstreams", { name: "rest", base_url: `${fixture.url}/api/v1`, openapi: REST_DOCUMENT });
  expect(r.status).toBe(201);
  for (const tool of TOOLS) expect((await t.admin("PUT", `/admin/tools/${tool}`, { price_mc: 1000, upstream_cost_mc: 400 })).status).toBe(200);
  jwks = (await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json()) as Jwks;
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fixture.stop();
});

const spent = async (keyId: string) => (await t.ledger.keys.get(keyId))!.spentMc;
const outcomeOf = (r: Response) => r.headers.get("x-clearing-outcome");
const key = () => t.makeKey({ budget_mc: 1_000_000, reset: "none", allow: TOOLS });

/** Runs `fn` and returns what reached the fixture meanwhile. */
async function reaching<T>(fn: () => Promise<T>): Promise<{ out: T; seen: RestFixture["seen"] }> {
  const from = fixture.seen.length;
  const out = await fn();
  return { out, seen: fixture.seen.slice(from) };
}

describe("registering a REST upstream", () => {
  test("one call with the document gives one tool per operation; the listing shows its kind and base URL", async () => {
    const listed = (await (await t.admin("GET", "/admin/upstreams")).json()) as Record<string, unknown>[];
    expect(listed).toEqual([
      {
        name: "rest",
        kind: "rest",
        url: `${fixture.url}/api/v1`,
        openapi_url: null,
        header_names: [],
        auth: null,
        created_at: expect.any(String),
        refreshed_at: expect.any(String),
      },
    ]);
    const tools = (await (await t.admin("GET", "/admin/tools")).json()) as { name: string; upstream: string }[];
    expect(tools.filter((x) => x.upstream === "rest").map((x) => x.name)).toEqual(expect.arrayContaining(TOOLS));
  });

  test("the answer lists the tools and the operations left out", async () => {
    await using t2 = await makeDesk();
    const r = await t2.admin("POST", "/admin/upstreams", { name: "again", base_url: fixture.url, openapi: REST_DOCUMENT });
    expect(r.status).toBe(201);
    const body = (await r.json()) as { kind: string; tools: string[]; skipped: unknown[] };
    expect(body.kind).toBe("rest");
    expect(body.tools).toHaveLength(14);
    expect(body.tools[0]).toBe("again__getItem");
    expect(body.skipped).toEqual([]);
    // No request reaches the API to register it: the tools come from the document.
    expect(fixture.seen.every((s) => !s.path.startsWith("/again"))).toBe(true);
  });

  test("strict bodies: one document source, a base URL without credentials, no MCP fields", async () => {
    await using t2 = await makeDesk();
    const cases: [Record<string, unknown>, Record<string, unknown>][] = [
      [
        { name: "a", base_url: fixture.url },
        { error: "FIELD_MISSING", field: "openapi" },
      ],
      [
        { name: "a", base_url: fixture.url, openapi: REST_DOCUMENT, openapi_url: `${fixture.url}/x` },
        { error: "VALUE_INVALID", field: "openapi_url" },
      ],
      [
        { name: "a", openapi: REST_DOCUMENT },
        { error: "FIELD_MISSING", field: "base_url" },
      ],
      [
        { name: "a", base_url: "ftp://x.example", openapi: REST_DOCUMENT },
        { error: "VALUE_INVALID", field: "base_url" },
      ],
      [
        { name: "a", base_url: "https://u:p@x.example", openapi: REST_DOCUMENT },
        { error: "VALUE_INVALID", field: "base_url" },
      ],
      [
        { name: "a", base_url: fixture.url, openapi: REST_DOCUMENT, url: fixture.url },
        { error: "FIELD_UNKNOWN", field: "url" },
      ],
      [
        { name: "a", base_url: fixture.url, openapi: REST_DOCUMENT, headers: {} },
        { error: "FIELD_UNKNOWN", field: "headers" },
      ],
      [
        { name: "a", base_url: fixture.url, openapi: [] },
        { error: "VALUE_INVALID", field: "openapi" },
      ],
      [
        { name: "A", base_url: fixture.url, openapi: REST_DOCUMENT },
        { error: "VALUE_INVALID", field: "name" },
      ],
      [
        { name: "a", base_url: fixture.url, openapi_url: "file:///etc/passwd" },
        { error: "VALUE_INVALID", field: "openapi_url" },
      ],
      [
        { name: "a", base_url: fixture.url, openapi: REST_DOCUMENT, auth: { type: "bearer" } },
        { error: "FIELD_MISSING", field: "auth.token" },
      ],
    ];
    for (const [body, answer] of cases) {
      const r = await t2.admin("POST", "/admin/upstreams", body);
      expect({ body, status: r.status, answer: await r.json() }).toEqual({ body, status: 400, answer });
    }
    expect(await t2.ledger.catalog.upstreams()).toEqual([]);
  });

  test("a name taken by any upstream, REST or MCP, is refused", async () => {
    const r = await t.admin("POST", "/admin/upstreams", { name: "rest", base_url: fixture.url, openapi: REST_DOCUMENT });
    expect(r.status).toBe(409);
    expect(await r.json()).toEqual({ error: "UPSTREAM_EXISTS" });
  });

  test("tool names outside 1-128 of [A-Za-z0-9_.-], or used twice, refuse the document with every one listed; nothing is stored", async () => {
    await using t2 = await makeDesk();
    const op = (operationId: string) => ({ get: { operationId, responses: { "200": { description: "ok" } } } });
    const document = {
      openapi: "3.1.0",
      info: { title: "bad names", version: "1" },
      paths: { "/a": op("has space"), "/b": op("x".repeat(130)), "/c": op("dup"), "/d": op("dup_") },
    };
    (document.paths as Record<string, unknown>)["/d"] = { get: { responses: { "200": { description: "ok" } } }, post: op("get_c").get };
    (document.paths as Record<string, unknown>)["/c"] = { get: { responses: { "200": { description: "ok" } } } };
    const r = await t2.admin("POST", "/admin/upstreams", { name: "bad", base_url: fixture.url, openapi: document });
    expect(r.status).toBe(400);
    const body = (await r.json()) as { error: string; problems: string[] };
    expect(body.error).toBe("UPSTREAM_DOCUMENT_REFUSED");
    expect(body.problems.some((p) => p.includes('"bad__has space"'))).toBe(true);
    expect(body.problems.some((p) => p.includes(`bad__${"x".repeat(20)}`))).toBe(true);
    // GET /c has no operationId: its built name get_c collides with POST /d's operationId.
    expect(body.problems.some((p) => p.includes("bad__get_c is used by both"))).toBe(true);
    expect(await t2.ledger.catalog.upstreams()).toEqual([]);
  });

  test("a remote $ref is refused before anything fetches it; an invalid document is refused with its reasons", async () => {
    await using t2 = await makeDesk();
    const counting = documentServer({ type: "object" });
    try {
      const document = structuredClone(REST_DOCUMENT) as Record<string, unknown>;
      (document as { components?: unknown }).components = { schemas: { Remote: { $ref: counting.url } } };
      const r = await t2.admin("POST", "/admin/upstreams", { name: "ssrf", base_url: fixture.url, openapi: document });
      expect(r.status).toBe(400);
      const body = (await r.json()) as { error: string; problems: string[] };
      expect(body.error).toBe("UPSTREAM_DOCUMENT_REFUSED");
      expect(body.problems.join(" ")).toContain("/components/schemas/Remote");
      expect(counting.requests()).toBe(0);

      const swagger = await t2.admin("POST", "/admin/upstreams", { name: "old", base_url: fixture.url, openapi: { swagger: "2.0", info: {}, paths: {} } });
      expect(swagger.status).toBe(400);
      expect(((await swagger.json()) as { error: string }).error).toBe("UPSTREAM_DOCUMENT_REFUSED");
      expect(await t2.ledger.catalog.upstreams()).toEqual([]);
    } finally {
      await counting.stop();
    }
  });

  test("openapi_url: fetched once at registration and again at each refresh; prices stay, gone operations go", async () => {
    await using t2 = await makeDesk();
    const served = documentServer(REST_DOCUMENT);
    try {
      const r = await t2.admin("POST", "/admin/upstreams", { name: "byurl", base_url: fixture.url, openapi_url: served.url });
      expect(r.status).toBe(201);
      expect(((await r.json()) as { openapi_url: string }).openapi_url).toBe(served.url);
      expect(served.requests()).toBe(1);
      expect((await t2.admin("PUT", "/admin/tools/byurl__getItem", { price_mc: 7, upstream_cost_mc: 1 })).status).toBe(200);

      const next = structuredClone(REST_DOCUMENT) as { paths: Record<string, unknown> };
      delete next.paths["/search"];
      next.paths["/items/{id}"] = { get: (REST_DOCUMENT.paths["/items/{id}"] as { get: unknown }).get };
      next.paths["/ping"] = { get: { operationId: "ping", responses: { "200": { description: "ok" } } } };
      served.set(next);
      const refreshed = await t2.admin("POST", "/admin/upstreams/byurl/refresh");
      expect(refreshed.status).toBe(200);
      const { tools } = (await refreshed.json()) as { tools: string[] };
      expect(served.requests()).toBe(2);
      expect(tools).toContain("byurl__ping");
      expect(tools).not.toContain("byurl__search");
      expect(tools).not.toContain("byurl__putItem");
      const records = await t2.ledger.catalog.tools();
      expect(records.find((x) => x.name === "byurl__getItem")).toMatchObject({ active: true, priceMc: 7 });
      expect(records.find((x) => x.name === "byurl__search")).toMatchObject({ active: false });

      // A refused document at refresh changes nothing.
      served.set({ openapi: "3.1.0" });
      expect((await t2.admin("POST", "/admin/upstreams/byurl/refresh")).status).toBe(400);
      expect((await t2.ledger.catalog.tools()).find((x) => x.name === "byurl__ping")).toMatchObject({ active: true });
    } finally {
      await served.stop();
    }
    // No answer at openapi_url: unreachable, and nothing is stored.
    const gone = await t2.admin("POST", "/admin/upstreams", { name: "gone", base_url: fixture.url, openapi_url: served.url });
    expect(gone.status).toBe(502);
    expect(((await gone.json()) as { error: string }).error).toBe("UPSTREAM_UNREACHABLE");
    expect(await t2.ledger.catalog.upstream("gone")).toBeNull();
  });

  test("an inline document is stored and read again at refresh", async () => {
    const r = await t.admin("POST", "/admin/upstreams/rest/refresh");
    expect(r.status).toBe(200);
    expect(((await r.json()) as { tools: string[] }).tools).toHaveLength(14);
  });
});

describe("calling a REST tool", () => {
  test("2xx charges; the upstream's JSON is structuredContent with its text copy; the receipt verifies", async () => {
    const k = await key();
    const args = { id: "42" };
    const { out: r, seen } = await reaching(() => t.call(k.secret, "rest__getItem", args));
    expect(r.status).toBe(200);
    expect(outcomeOf(r)).toBe("charged");
    const body = (await r.json()) as { result: Record<string, unknown>; receipt: { receipt: Record<string, unknown> } };
    expect(body.result).toEqual({ content: [{ type: "text", text: '{"id":"42","method":"GET"}' }], structuredContent: { id: "42", method: "GET" } });
    expect(body.receipt.receipt).toMatchObject({ outcome: "charged", tool: "rest__getItem", price_mc: 1000, amount_mc: 1000 });
    expect(verifyResponse(body, jwks, args).every((c) => c.ok)).toBe(true);
    expect(verifyResponse({ ...body, result: { ...body.result, structuredContent: { id: "43" } } }, jwks, args).find((c) => c.name === "result")?.ok).toBe(
      false,
    );
    expect(seen.map((s) => `${s.method} ${s.target}`)).toEqual(["GET /api/v1/items/42"]);
    expect(await spent(k.keyId)).toBe(1000);
  });

  test("query, header and body parameters reach the upstream as the document says", async () => {
    const k = await key();
    const { out: r, seen } = await reaching(() => t.call(k.secret, "rest__putItem", { id: "a b", dry: true, "X-Trace": "t-1", body: { n: 1 } }));
    expect(r.status).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.target).toBe("/api/v1/items/a%20b?dry=true");
    expect(seen[0]!.headers.get("x-trace")).toBe("t-1");
    expect(JSON.parse(seen[0]!.body)).toEqual({ n: 1 });
    const search = await reaching(() => t.call(k.secret, "rest__search", { q: "a&b=c", tags: ["x", "y"] }));
    expect(search.seen[0]!.target).toBe("/api/v1/search?q=a%26b%3Dc&tags=x&tags=y");
  });

  test("the status mapping: who pays, and which code the agent reads", async () => {
    const k = await key();
    const cases: [number, number, string, string][] = [
      [200, 200, "charged", ""],
      [201, 200, "charged", ""],
      [400, 400, "refunded_args_refused", "ARGS_REFUSED"],
      [404, 400, "refunded_args_refused", "ARGS_REFUSED"],
      [409, 400, "refunded_args_refused", "ARGS_REFUSED"],
      [422, 400, "refunded_args_refused", "ARGS_REFUSED"],
      [401, 502, "refunded_upstream_error", "UPSTREAM_AUTH_FAILED"],
      [403, 502, "refunded_upstream_error", "UPSTREAM_AUTH_FAILED"],
      [429, 502, "refunded_upstream_error", "UPSTREAM_ERROR"],
      [500, 502, "refunded_upstream_error", "UPSTREAM_ERROR"],
      [503, 502, "refunded_upstream_error", "UPSTREAM_ERROR"],
      [418, 502, "refunded_upstream_error", "UPSTREAM_ERROR"],
    ];
    for (const [upstream, status, outcome, code] of cases) {
      const before = await spent(k.keyId);
      const r = await t.call(k.secret, "rest__status", { code: upstream });
      const body = (await r.json()) as { error?: string; receipt?: { receipt: Record<string, unknown> } };
      const charged = outcome === "charged" ? 1000 : 0;
      expect({ upstream, status: r.status, outcome: outcomeOf(r), code: body.error ?? "", paid: (await spent(k.keyId)) - before }).toEqual({
        upstream,
        status,
        outcome,
        code,
        paid: charged,
      });
      // Refunds carry their receipt too, and it verifies.
      expect(body.receipt?.receipt.outcome).toBe(outcome);
      expect(verifyResponse(body, jwks, { code: upstream }).every((c) => c.ok)).toBe(true);
    }
  });

  test("a redirect is never followed: refunded as an upstream error, its target never reached", async () => {
    const k = await key();
    const { out: r, seen } = await reaching(() => t.call(k.secret, "rest__redirect", {}));
    expect(r.status).toBe(502);
    expect(await r.json()).toMatchObject({ error: "UPSTREAM_ERROR" });
    expect(seen.map((s) => s.path)).toEqual(["/api/v1/redirect"]);
    expect(await spent(k.keyId)).toBe(0);
  });

  test("no answer within the deadline: refunded_timeout", async () => {
    const k = await key();
    const r = await t.call(k.secret, "rest__hang", {});
    expect(r.status).toBe(504);
    expect(outcomeOf(r)).toBe("refunded_timeout");
    expect(await r.json()).toMatchObject({ error: "UPSTREAM_TIMEOUT" });
    fixture.release();
    expect(await spent(k.keyId)).toBe(0);
  });

  test("arguments that break the schema, or could not be sent, are refused before any spend and reach nothing", async () => {
    const k = await key();
    const cases: [string, unknown, unknown[]][] = [
      ["rest__getItem", {}, [{ path: "/id", rule: "required" }]],
      ["rest__getItem", { id: 42 }, [{ path: "/id", rule: "type" }]],
      ["rest__getItem", { id: "1", extra: 1 }, [{ path: "/", rule: "additionalProperties" }]],
      ["rest__status", { code: "500" }, [{ path: "/code", rule: "type" }]],
      ["rest__putItem", { id: "1" }, [{ path: "/body", rule: "required" }]],
      ["rest__getItem", { id: ".." }, [{ path: "/id", rule: "path_segment" }]],
      ["rest__getItem", { id: "" }, [{ path: "/id", rule: "path_segment" }]],
    ];
    for (const [tool, args, problems] of cases) {
      const { out: r, seen } = await reaching(() => t.call(k.secret, tool, args));
      const body = (await r.json()) as { error: string; problems: unknown[] };
      expect({ tool, args, status: r.status, error: body.error, seen: seen.length }).toEqual({ tool, args, status: 400, error: "ARGS_INVALID", seen: 0 });
      expect(body.problems).toEqual(problems);
    }
    expect(await spent(k.keyId)).toBe(0);
  });

  test("path-parameter attacks reach nothing but the operation's path, with the value in one segment", async () => {
    const k = await key();
    const attacks = [
      "../admin",
      "../../admin",
      "%2e%2e%2f",
      "%2e%2e/admin",
      "..%2fadmin",
      "a/b",
      "?x=",
      "#",
      "#/../admin",
      "..;/admin",
      "..\\admin",
      "//evil.example/x",
      "%00",
      ".%2e",
    ];
    for (const value of attacks) {
      const { out: r, seen } = await reaching(() => t.call(k.secret, "rest__getPart", { id: value, part: value }));
      expect({ value, status: r.status }).toEqual({ value, status: 200 });
      expect(seen).toHaveLength(1);
      const segments = seen[0]!.path.split("/").slice(1).map(decodeURIComponent);
      expect(segments).toEqual(["api", "v1", "items", value, "parts", value]);
      expect(new URL(seen[0]!.target, "http://x").search).toBe("");
      expect(((await r.json()) as { result: { structuredContent: unknown } }).result.structuredContent).toEqual({ id: value, part: value });
    }
  });

  test("query and basic credentials reach the API as written, and never an answer or the listing", async () => {
    await using t2 = await makeDesk();
    const key = "qk-SECRET-0f9e8d";
    const password = "pw-SECRET-7a6b5c";
    for (const [name, auth] of [
      ["byquery", { type: "query", name: "api_key", value: key }],
      ["bybasic", { type: "basic", username: "desk", password }],
    ] as const) {
      const r = await t2.admin("POST", "/admin/upstreams", { name, base_url: fixture.url, openapi: REST_DOCUMENT, auth });
      expect(r.status).toBe(201);
      expect(await r.text()).not.toContain(auth.type === "query" ? key : password);
      expect((await t2.admin("PUT", `/admin/tools/${name}__search`, { price_mc: 1, upstream_cost_mc: 0 })).status).toBe(200);
    }
    const k = await t2.makeKey({ budget_mc: 100, reset: "none", allow: ["byquery__search", "bybasic__search"] });
    const q = await reaching(() => t2.call(k.secret, "byquery__search", { q: "x" }));
    expect(q.seen.map((s) => s.target)).toEqual([`/search?q=x&api_key=${key}`]);
    expect(await q.out.text()).not.toContain(key);
    const b = await reaching(() => t2.call(k.secret, "bybasic__search", { q: "y" }));
    expect(b.seen.map((s) => s.headers.get("authorization"))).toEqual([`Basic ${btoa(`desk:${password}`)}`]);
    const listed = await (await t2.admin("GET", "/admin/upstreams")).text();
    expect(listed).not.toContain(key);
    expect(listed).not.toContain(password);
    expect(JSON.parse(listed)).toEqual([
      expect.objectContaining({ name: "bybasic", auth: { type: "basic", state: "ok" } }),
      expect.objectContaining({ name: "byquery", auth: { type: "query", name: "api_key", state: "ok" } }),
    ]);
  });

  test("over MCP: listed with its schemas; a call answers structuredContent with the text copy and a receipt that verifies", async () => {
    const k = await key();
    await using served: ServedDesk = serveDesk(t);
    await using c = await mcpClient(served.url, k.secret);
    const { tools } = await c.client.listTools();
    const getItem = tools.find((x) => x.name === "rest__getItem")!;
    expect(getItem.inputSchema).toMatchObject({ type: "object", required: ["id"], properties: { id: { type: "string" } } });
    expect(getItem.outputSchema).toMatchObject({ type: "object", required: ["id"] });
    const result = (await c.client.callTool({ name: "rest__getItem", arguments: { id: "7" } })) as Record<string, unknown>;
    expect(result.isError).toBeUndefined();
    expect(result.structuredContent).toEqual({ id: "7", method: "GET" });
    expect(result.content).toEqual([{ type: "text", text: '{"id":"7","method":"GET"}' }]);
    expect(verifyResponse(result, jwks, { id: "7" }).every((x) => x.ok)).toBe(true);
    const refused = (await c.client.callTool({ name: "rest__status", arguments: { code: 401 } })) as Record<string, unknown>;
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toEqual({ error: "UPSTREAM_AUTH_FAILED" });
  });
});
