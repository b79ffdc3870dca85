// What an upstream declares beyond a tool's name and input schema reaches agents unchanged
// (title, outputSchema, annotations and _meta in tools/list; structuredContent, _meta and every
// field of the content blocks in tools/call), and the receipt binds exactly what the agent
// receives, over MCP and REST, whatever `_meta` holds. A real SDK upstream (listing-upstream.ts)
// behind the desk's fetch handler on a real Bun.serve.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { chmodSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { Desk } from "../../src/core/desk/desk.ts";
import { importSealingKey } from "../../src/core/desk/seal.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { mcpConnector } from "../../src/adapters/mcp-upstream/connector.ts";
import { restConnector } from "../../src/adapters/rest-upstream/connector.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { DESK_MIGRATIONS } from "../../src/adapters/sqlite/desk/migrations.ts";
import { generateSigningKey, type Jwks, loadSigner, MCP_RECEIPT_META_KEY, resultSha256, verifyResponse } from "../../src/core/receipt/index.ts";
import { tempDir } from "../helpers/tmp.ts";
import { FORECAST_RESULT, FORECAST_TOOL, type ListingUpstream, MIRROR_TOOL, SHAPED_TOOL, startListingUpstream } from "../fixtures/listing-upstream.ts";
import { makeDesk, type TestDesk } from "./desk-harness.ts";
import { mcpClient, rawMcp, type ServedDesk, serveDesk } from "./desk-mcp-harness.ts";

let up: ListingUpstream;
let t: TestDesk;
let served: ServedDesk;
let jwks: Jwks;
let secret: string;

beforeAll(async () => {
  up = startListingUpstream();
  t = await makeDesk();
  expect((await t.admin("POST", "/admin/upstreams", { name: "wx", url: up.url })).status).toBe(201);
  for (const tool of ["wx__forecast", "wx__mirror", "wx__shaped"])
    expect((await t.admin("PUT", `/admin/tools/${tool}`, { price_mc: 10, upstream_cost_mc: 1 })).status).toBe(200);
  secret = (await t.makeKey({ budget_mc: 1_000_000_000, reset: "none", allow: ["wx__forecast", "wx__mirror", "wx__shaped"] })).secret;
  served = serveDesk(t);
  jwks = (await (await fetch(`${served.url}/.well-known/receipt-signing-key.json`)).json()) as Jwks;
});

afterAll(async () => {
  await served.stop();
  await t[Symbol.asyncDispose]();
  await up.stop();
});

const auth = () => ({ authorization: `Bearer ${secret}` });
let rpcId = 0;

/** tools/call over MCP as raw JSON-RPC: the response exactly as the agent receives it. */
async function callMcp(name: string, args: Record<string, unknown>): Promise<{ jsonrpc: string; id: number; result: Record<string, unknown> }> {
  const r = await rawMcp(served.url, { jsonrpc: "2.0", id: ++rpcId, method: "tools/call", params: { name, arguments: args } }, auth());
  expect(r.status).toBe(200);
  return (await r.json()) as { jsonrpc: string; id: number; result: Record<string, unknown> };
}

async function callRest(name: string, args: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await t.call(secret, name, args);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const withoutOurEntry = (result: Record<string, unknown>): Record<string, unknown> => {
  const { [MCP_RECEIPT_META_KEY]: _ours, ...others } = result._meta as Record<string, unknown>;
  return { ...result, _meta: others };
};

describe("tools/list passes the upstream's own fields through", () => {
  test("over MCP: title, outputSchema, annotations (a vendor key too) and _meta exactly as listed", async () => {
    const r = await rawMcp(served.url, { jsonrpc: "2.0", id: 1, method: "tools/list" }, auth());
    const { tools } = ((await r.json()) as { result: { tools: Record<string, unknown>[] } }).result;
    const forecast = tools.find((x) => x.name === "wx__forecast")!;
    expect(forecast).toEqual({
      name: "wx__forecast",
      title: FORECAST_TOOL.title,
      description: "the forecast for a city Price: 10 mc (0.01 cents) per call.",
      inputSchema: FORECAST_TOOL.inputSchema,
      outputSchema: FORECAST_TOOL.outputSchema,
      annotations: FORECAST_TOOL.annotations,
      _meta: FORECAST_TOOL._meta,
    });
    // A tool that declares none of them gets none.
    expect(Object.keys(tools.find((x) => x.name === "wx__mirror")!).sort()).toEqual(["description", "inputSchema", "name"]);
  });

  test("an SDK client lists them, and its callTool checks the structured answer against the output schema", async () => {
    await using c = await mcpClient(served.url, secret);
    const { tools } = await c.client.listTools();
    expect(tools.find((x) => x.name === "wx__forecast")!.outputSchema as unknown).toEqual(FORECAST_TOOL.outputSchema);
    const result = await c.client.callTool({ name: "wx__forecast", arguments: { city: "Lyon" } });
    expect(result.structuredContent).toEqual(FORECAST_RESULT.structuredContent);
  });

  test("over REST: GET /v1/tools lists output_schema and annotations (null when the upstream gave none)", async () => {
    const r = await fetch(`${served.url}/v1/tools`, { headers: auth() });
    const { tools } = (await r.json()) as { tools: Record<string, unknown>[] };
    const byName = new Map(tools.map((x) => [x.name, x]));
    expect(byName.get("wx__forecast")).toEqual({
      name: "wx__forecast",
      description: FORECAST_TOOL.description,
      price_mc: 10,
      input_schema: FORECAST_TOOL.inputSchema,
      output_schema: FORECAST_TOOL.outputSchema,
      annotations: FORECAST_TOOL.annotations,
      approval_needed: false,
    });
    expect(byName.get("wx__mirror")).toMatchObject({ input_schema: MIRROR_TOOL.inputSchema, output_schema: null, annotations: null });
  });

  test("the fields are stored at registration, in the tool's ledger row", async () => {
    const row = (await t.ledger.catalog.tool("wx__forecast"))!;
    expect(row.listing).toEqual({
      title: FORECAST_TOOL.title,
      outputSchema: FORECAST_TOOL.outputSchema,
      annotations: FORECAST_TOOL.annotations,
      _meta: FORECAST_TOOL._meta,
    });
    expect((await t.ledger.catalog.tool("wx__mirror"))!.listing).toEqual({});
  });
});

describe("the listing column", () => {
  test("a ledger made before it opens with no listed fields for its tools; a refresh stores them", async () => {
    await using dir = tempDir("desk-listing-");
    const path = join(dir.path, "desk.db");
    const before = DESK_MIGRATIONS.findIndex((m) => m.name === "desk tool listing fields");
    expect(before).toBeGreaterThan(0);
    const raw = new Database(path, { create: true, strict: true });
    for (const [i, m] of DESK_MIGRATIONS.slice(0, before).entries()) {
      raw.run(m.sql);
      raw.run(`PRAGMA user_version = ${i + 1}`);
    }
    raw.run("INSERT INTO upstreams (name, url, header_names, created_at, refreshed_at) VALUES ('wx', ?, '[]', 0, 0)", [up.url]);
    raw.run("INSERT INTO tools (name, upstream, upstream_tool, description, input_schema) VALUES ('wx__forecast', 'wx', 'forecast', 'old', ?)", [
      JSON.stringify(FORECAST_TOOL.inputSchema),
    ]);
    raw.close();
    // A desk's own ledger is 0600 (SPEC 10); the hand-made one here is made so too.
    chmodSync(path, 0o600);
    const ledger = new SqliteDeskLedger(path);
    const desk = await Desk.open({
      ledger,
      connectors: { mcp: mcpConnector, rest: restConnector },
      openCredential,
      signer: loadSigner(generateSigningKey().privatePem),
      sealingKey: await importSealingKey(new Uint8Array(32)),
    });
    try {
      expect((await ledger.catalog.tool("wx__forecast"))!.listing).toEqual({});
      expect(desk.tool("wx__forecast")!.listing).toEqual({});
      await desk.refreshUpstream("wx");
      expect(desk.tool("wx__forecast")!.listing).toEqual({
        title: FORECAST_TOOL.title,
        outputSchema: FORECAST_TOOL.outputSchema,
        annotations: FORECAST_TOOL.annotations,
        _meta: FORECAST_TOOL._meta,
      });
    } finally {
      await desk.close();
      await ledger.close();
    }
  });
});

describe("tools/call passes the upstream's result through, and the receipt binds it", () => {
  test("over MCP: the result is the upstream's, every field kept, with only our receipt added to _meta; it verifies", async () => {
    const response = await callMcp("wx__forecast", { city: "Lyon" });
    expect(withoutOurEntry(response.result)).toEqual(FORECAST_RESULT);
    expect(verifyResponse(response, jwks, { city: "Lyon" }).map((c) => c.ok)).toEqual([true, true, true, true]);
    expect(verifyResponse(response.result, jwks, { city: "Lyon" }).map((c) => c.ok)).toEqual([true, true, true, true]);
  });

  test("over REST: body.result is the upstream's result exactly; it verifies", async () => {
    const { status, body } = await callRest("wx__forecast", { city: "Lyon" });
    expect(status).toBe(200);
    expect(body.result).toEqual(FORECAST_RESULT);
    expect(verifyResponse(body, jwks, { city: "Lyon" }).every((c) => c.ok)).toBe(true);
  });

  test("an upstream's own _meta receipt never passes through: REST drops it, MCP carries the desk's there", async () => {
    const fake = { payload: "e30", signature: "AA", kid: "forged", receipt: { amount_mc: 0 } };
    up.answerNext({ content: [{ type: "text", text: "x" }], _meta: { trace: "t1", [MCP_RECEIPT_META_KEY]: fake } });
    const rest = await callRest("wx__mirror", {});
    expect(rest.body.result).toEqual({ content: [{ type: "text", text: "x" }], _meta: { trace: "t1" } });
    expect(verifyResponse(rest.body, jwks, {}).every((c) => c.ok)).toBe(true);
    const mcp = await callMcp("wx__mirror", {});
    const ours = (mcp.result._meta as Record<string, unknown>)[MCP_RECEIPT_META_KEY] as { kid: string };
    expect(ours.kid).toBe(jwks.keys[0]!.kid);
    expect(withoutOurEntry(mcp.result)).toEqual({ content: [{ type: "text", text: "x" }], _meta: { trace: "t1" } });
    expect(verifyResponse(mcp, jwks, {}).every((c) => c.ok)).toBe(true);
  });
});

describe("an answer must keep the output schema its tool lists", () => {
  test("structuredContent that fits is charged; one that does not, or none, is refunded as an upstream error", async () => {
    const auditRows = async () => (await t.ledger.records.audit({ orgId: null, keyId: null, sinceMs: null, limit: 10_000 })).length;
    up.answerNext({ content: [], structuredContent: { n: 1 } });
    expect((await callRest("wx__shaped", {})).status).toBe(200);
    for (const broken of [{ content: [], structuredContent: { n: "one" } }, { content: [{ type: "text", text: "1" }] }]) {
      up.answerNext(broken);
      const before = await auditRows();
      const r = await t.call(secret, "wx__shaped", {});
      expect(r.status).toBe(502);
      expect(r.headers.get("x-clearing-outcome")).toBe("refunded_upstream_error");
      expect(((await r.json()) as { error: string }).error).toBe("UPSTREAM_ERROR");
      expect(await auditRows()).toBe(before + 1);
      const mcp = await callMcp("wx__shaped", {});
      expect(mcp.result.structuredContent).toEqual({ error: "UPSTREAM_ERROR" });
      expect(mcp.result.isError).toBe(true);
    }
  });

  test("an upstream whose output schema does not compile is refused at registration, and nothing is stored", async () => {
    await using bad = startListingUpstream({
      extraTools: [{ ...SHAPED_TOOL, name: "broken", outputSchema: { type: "object", properties: { n: { type: "no-such-type" } } } }],
    });
    const r = await t.admin("POST", "/admin/upstreams", { name: "bad", url: bad.url });
    expect(r.status).toBe(502);
    expect(await r.json()).toEqual({ error: "UPSTREAM_SCHEMA_REFUSED", tool: "broken", reason: "schema" });
    expect(await t.ledger.catalog.upstream("bad")).toBeNull();
    expect(t.logs).toContain("upstream bad: tool broken: output schema refused: neither a draft-07 nor a 2020-12 validator compiles it");
  });
});

describe("every _meta shape of an upstream result verifies on both transports", () => {
  const content = [{ type: "text", text: "answer" }];
  const shapes: [string, Record<string, unknown> | undefined][] = [
    ["absent", undefined],
    ["empty", {}],
    ["other entries only", { trace: "t1" }],
    ["other entries and the upstream's own receipt entry", { trace: "t1", [MCP_RECEIPT_META_KEY]: { forged: true } }],
    ["only the upstream's own receipt entry", { [MCP_RECEIPT_META_KEY]: { forged: true } }],
  ];
  test.each(shapes)("_meta %s", async (_name, meta) => {
    up.answerNext(meta === undefined ? { content } : { content, _meta: meta });
    const rest = await callRest("wx__mirror", {});
    expect(verifyResponse(rest.body, jwks, {}).map((c) => `${c.name} ${c.ok}`)).toEqual(["signature true", "readable_copy true", "result true", "params true"]);
    expect(JSON.stringify(rest.body.result)).not.toContain("forged");
    const mcp = await callMcp("wx__mirror", {});
    expect(verifyResponse(mcp, jwks, {}).map((c) => `${c.name} ${c.ok}`)).toEqual(["signature true", "readable_copy true", "result true", "params true"]);
    expect(JSON.stringify(mcp.result)).not.toContain("forged");
  });
});

// Random tools/call results with every kind of `_meta` (none, {}, other entries, other entries
// beside an upstream's own receipt entry, that entry alone), random content blocks and
// structured content, each answered through the whole desk over REST and over MCP.
const json = fc.jsonValue({ maxDepth: 3, stringUnit: "grapheme" });
const others = fc.dictionary(
  fc.string({ unit: "grapheme", maxLength: 12 }).filter((k) => k !== MCP_RECEIPT_META_KEY && k !== "__proto__"),
  json,
  { maxKeys: 3 },
);
const metaShape = fc.oneof(
  fc.constant(undefined),
  fc.constant({}),
  others,
  others.map((o) => ({ ...o, [MCP_RECEIPT_META_KEY]: { forged: true } })),
  fc.constant({ [MCP_RECEIPT_META_KEY]: "forged" }),
);
const block = fc.record(
  {
    type: fc.constant("text"),
    text: fc.string({ unit: "grapheme", maxLength: 40 }),
    annotations: fc.record({ priority: fc.double({ min: 0, max: 1, noNaN: true }), "x-vendor": json }, { requiredKeys: [] }),
    _meta: others,
    "x-extra": json,
  },
  { requiredKeys: ["type", "text"] },
);
const randomResult = fc
  .record(
    {
      content: fc.array(block, { maxLength: 3 }),
      structuredContent: fc.dictionary(
        fc.string({ maxLength: 8 }).filter((k) => k !== "__proto__"),
        json,
        { maxKeys: 4 },
      ),
      meta: metaShape,
    },
    { requiredKeys: ["content", "meta"] },
  )
  .map(({ meta, ...rest }) => (meta === undefined ? rest : { ...rest, _meta: meta }) as Record<string, unknown>);

describe("property: the desk's hash of what the agent receives equals the verifier's", () => {
  test("random results over REST and MCP: charged, passed through, and verified", async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(randomResult, fc.integer({ min: 0, max: 1000 }), async (result, i) => {
        up.answerNext(result);
        const args = { n: i };
        const rest = await callRest("wx__mirror", args);
        expect(rest.status).toBe(200);
        const restChecks = verifyResponse(rest.body, jwks, args);
        expect(restChecks.map((c) => [c.name, c.ok])).toEqual([
          ["signature", true],
          ["readable_copy", true],
          ["result", true],
          ["params", true],
        ]);
        const signedRest = (rest.body.receipt as { receipt: { result_sha256: string } }).receipt.result_sha256;
        expect(resultSha256(rest.body.result)).toBe(signedRest);

        const mcp = await callMcp("wx__mirror", args);
        expect(verifyResponse(mcp, jwks, args).every((c) => c.ok)).toBe(true);
        expect(verifyResponse(mcp.result, jwks, args).every((c) => c.ok)).toBe(true);
        const signedMcp = ((mcp.result._meta as Record<string, unknown>)[MCP_RECEIPT_META_KEY] as { receipt: { result_sha256: string } }).receipt.result_sha256;
        // One definition: the same upstream answer binds to the same hash on both transports.
        expect(signedMcp).toBe(signedRest);

        // Pass-through: what the agent gets is the upstream's answer less its own receipt entry.
        const meta = result._meta as Record<string, unknown> | undefined;
        const { [MCP_RECEIPT_META_KEY]: _theirs, ...kept } = meta ?? {};
        const expected = meta === undefined ? result : { ...result, _meta: kept };
        expect(rest.body.result).toEqual(expected);
        const { _meta: mcpMeta, ...mcpRest } = mcp.result;
        const { _meta: _expectedMeta, ...expectedRest } = expected;
        expect(mcpRest).toEqual(expectedRest);
        expect(withoutOurEntry({ _meta: mcpMeta })._meta).toEqual(meta === undefined ? {} : kept);
        n++;
      }),
      { numRuns: 80, seed: 20261130 },
    );
    expect(n).toBe(80);
  }, 120_000);
});
