// The desk's MCP endpoint with the SDK's own client over Streamable HTTP, against a real Bun.serve
// and the fixture upstream: the tool list is the allowlist, a paid call carries a receipt in
// _meta that verifies and moves the ledger exactly as REST does, each refusal is a tool result
// with its code, and auth, Host and Origin are checked before the transport.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { priceSentence } from "../../src/commands/desk/mcp.ts";
import { hostAllowed } from "../../src/commands/desk/site-check.ts";
import { type Jwks, MCP_RECEIPT_META_KEY, verifyResponse } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";
import { mcpClient, rawMcp, type ServedDesk, serveDesk } from "./desk-mcp-harness.ts";

const clock = manualClock("2026-11-30T10:00:00.000Z");
let fx: UpstreamFixture;
let t: TestDesk;
let served: ServedDesk;
let jwks: Jwks;

const ALLOW = ["fx__echo", "fx__fail_5xx", "fx__fail_transport", "fx__hang", "fx__refuse", "fx__refuse_result", "fx__tool_error"];

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: [...ALLOW, "fx__add"], priceMc: 1500, upstreamCostMc: 400 }, { now: clock.now, upstreamTimeoutMs: 400 });
  served = serveDesk(t);
  jwks = (await (await fetch(`${served.url}/.well-known/receipt-signing-key.json`)).json()) as Jwks;
});

afterAll(async () => {
  await served.stop();
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

type ToolResult = {
  content: { type: string; text?: string }[];
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
};

const receiptOf = (r: ToolResult) => r._meta?.[MCP_RECEIPT_META_KEY] as { receipt: Record<string, unknown> } | undefined;
const spent = async (keyId: string) => (await t.ledger.keys.get(keyId))!.spentMc;
const auditOf = (keyId: string) => t.ledger.records.audit({ orgId: null, keyId, sinceMs: null, limit: 100 });

async function callMcp(secret: string, name: string, args?: Record<string, unknown>): Promise<ToolResult> {
  await using c = await mcpClient(served.url, secret);
  return (await c.client.callTool(args === undefined ? { name } : { name, arguments: args })) as ToolResult;
}

describe("desk MCP endpoint", () => {
  test("tools/list is exactly the key's allowlist, with the upstream's schema and the price in the description", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo", "fx__add", "fx__not_a_tool"], prices: { fx__add: 250 } });
    await using c = await mcpClient(served.url, k.secret);
    const { tools } = await c.client.listTools();
    expect(tools.map((x) => x.name).sort()).toEqual(["fx__add", "fx__echo"]);
    const echo = tools.find((x) => x.name === "fx__echo")!;
    expect(echo.description).toBe("returns its text Price: 1,500 mc (1.5 cents) per call.");
    expect(echo.inputSchema).toEqual({
      type: "object",
      properties: { text: { type: "string", maxLength: 1000 } },
      required: ["text"],
      additionalProperties: false,
    });
    expect(tools.find((x) => x.name === "fx__add")!.description).toBe("adds two integers Price: 250 mc (0.25 cents) per call.");
  });

  test("a paid call returns the upstream's result with the whole envelope in _meta; it verifies and matches the REST path's ledger effects", async () => {
    const viaMcp = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const viaRest = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const args = { text: "hello over mcp" };
    const before = fx.calls.get("echo") ?? 0;
    const result = await callMcp(viaMcp.secret, "fx__echo", args);
    expect(result.isError).toBeUndefined();
    expect(result.content).toEqual([{ type: "text", text: "hello over mcp" }]);
    const envelope = receiptOf(result)!;
    expect(Object.keys(envelope).sort()).toEqual(["kid", "payload", "receipt", "signature"]);
    expect(verifyResponse(result, jwks, args).every((c) => c.ok)).toBe(true);
    // The same answer, changed by one character, no longer matches result_sha256.
    const tampered = { ...result, content: [{ type: "text", text: "hello over mcP" }] };
    expect(verifyResponse(tampered, jwks, args).find((c) => c.name === "result")?.ok).toBe(false);

    const rest = (await (await t.call(viaRest.secret, "fx__echo", args)).json()) as { result: unknown; receipt: { receipt: Record<string, unknown> } };
    expect(fx.calls.get("echo")).toBe(before + 2);
    const pick = (r: Record<string, unknown>) => {
      const { id: _i, key_id: _k, org_id: _o, issued_at: _a, kid: _d, ...rest } = r;
      return rest;
    };
    expect(pick(envelope.receipt)).toEqual(pick(rest.receipt.receipt));
    expect(envelope.receipt).toMatchObject({ outcome: "charged", http_status: 200, price_mc: 1500, amount_mc: 1500, remaining_mc: 3500 });
    expect(await spent(viaMcp.keyId)).toBe(await spent(viaRest.keyId));
    const audit = async (keyId: string) => (await auditOf(keyId)).map(({ keyId: _k, orgId: _o, receiptId: _r, ...row }) => row);
    expect(await audit(viaMcp.keyId)).toEqual(await audit(viaRest.keyId));
    expect((await auditOf(viaMcp.keyId))[0]!.receiptId).toBe(envelope.receipt.id as string);
  });

  test("absent arguments count as {} (schema check and params_sha256)", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const result = await callMcp(k.secret, "fx__tool_error");
    expect(result.structuredContent).toEqual({ error: "TOOL_FAILED" });
    expect(verifyResponse(result, jwks, {}).every((c) => c.ok)).toBe(true);
    const missing = await callMcp(k.secret, "fx__echo");
    expect(missing.structuredContent).toEqual({ error: "ARGS_INVALID", problems: [{ path: "/text", rule: "required" }] });
  });

  const noReceipt = [
    { name: "unknown tool", tool: "fx__nope", args: {}, code: "TOOL_UNKNOWN" },
    { name: "arguments against the schema", tool: "fx__echo", args: { text: 5 }, code: "ARGS_INVALID" },
  ] as const;
  for (const c of noReceipt) {
    test(`refusal without a receipt: ${c.name} → isError ${c.code}, nothing charged, no upstream call`, async () => {
      const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
      const before = fx.totalCalls();
      const result = await callMcp(k.secret, c.tool, c.args);
      expect(result.isError).toBe(true);
      expect(result.structuredContent?.error).toBe(c.code);
      expect(JSON.parse(result.content[0]!.text!)).toEqual(result.structuredContent!);
      expect(receiptOf(result)).toBeUndefined();
      expect(fx.totalCalls()).toBe(before);
      expect(await spent(k.keyId)).toBe(0);
    });
  }

  test("a fault of the desk's own → an isError INTERNAL result holding the code only; the cause stays in the log and nothing moves", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const CAUSE = "ledger-fault-3b9d: disk on fire";
    t.ledger.testOnlyDatabase().run(`CREATE TRIGGER planted_fault BEFORE INSERT ON reservations BEGIN SELECT RAISE(ABORT, '${CAUSE}'); END`);
    let result: ToolResult;
    const before = fx.totalCalls();
    try {
      result = await callMcp(k.secret, "fx__echo", { text: "x" });
    } finally {
      t.ledger.testOnlyDatabase().run("DROP TRIGGER planted_fault");
    }
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({ error: "INTERNAL" });
    expect(JSON.stringify(result)).not.toContain("disk on fire");
    expect(t.logs.some((l) => l.includes(CAUSE))).toBe(true);
    expect(fx.totalCalls()).toBe(before);
    expect(await spent(k.keyId)).toBe(0);
  });

  test("refusal with a receipt: a tool off the allowlist → isError TOOL_NOT_ALLOWED and a refused_not_allowed receipt", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo"] });
    const before = fx.totalCalls();
    const result = await callMcp(k.secret, "fx__add", { a: 1, b: 2 });
    expect(result).toMatchObject({
      isError: true,
      structuredContent: { error: "TOOL_NOT_ALLOWED" },
      content: [{ type: "text", text: '{"error":"TOOL_NOT_ALLOWED"}' }],
    });
    expect(receiptOf(result)!.receipt).toMatchObject({ outcome: "refused_not_allowed", http_status: 403, amount_mc: 0, result_sha256: null });
    expect(verifyResponse(result, jwks, { a: 1, b: 2 }).every((c) => c.ok)).toBe(true);
    expect(fx.totalCalls()).toBe(before);
  });

  test("refusal with a receipt: no room in the budget → isError BUDGET_EXHAUSTED and a refused_budget receipt", async () => {
    const k = await t.makeKey({ budget_mc: 2000, reset: "none", allow: ALLOW });
    expect((await callMcp(k.secret, "fx__echo", { text: "a" })).isError).toBeUndefined();
    const result = await callMcp(k.secret, "fx__echo", { text: "b" });
    expect(result.structuredContent).toEqual({ error: "BUDGET_EXHAUSTED" });
    expect(receiptOf(result)!.receipt).toMatchObject({ outcome: "refused_budget", http_status: 402, remaining_mc: 500 });
    expect(await spent(k.keyId)).toBe(1500);
  });

  const refunds = [
    { tool: "fx__fail_5xx", args: {}, code: "UPSTREAM_ERROR", outcome: "refunded_upstream_error", status: 502 },
    { tool: "fx__fail_transport", args: {}, code: "UPSTREAM_ERROR", outcome: "refunded_upstream_error", status: 502 },
    { tool: "fx__hang", args: {}, code: "UPSTREAM_TIMEOUT", outcome: "refunded_timeout", status: 504 },
    { tool: "fx__refuse", args: { text: "x" }, code: "ARGS_REFUSED", outcome: "refunded_args_refused", status: 400 },
    { tool: "fx__tool_error", args: {}, code: "TOOL_FAILED", outcome: "refunded_upstream_error", status: 502 },
  ] as const;
  for (const c of refunds) {
    test(`refunded: ${c.tool} → isError ${c.code} with a ${c.outcome} receipt, nothing kept`, async () => {
      const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
      const result = await callMcp(k.secret, c.tool, c.args);
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toEqual({ error: c.code });
      expect(receiptOf(result)!.receipt).toMatchObject({ outcome: c.outcome, http_status: c.status, price_mc: 1500, amount_mc: 0, remaining_mc: 5000 });
      expect(verifyResponse(result, jwks, c.args).every((x) => x.ok)).toBe(true);
      expect(await spent(k.keyId)).toBe(0);
      expect(await t.ledger.check.money()).toEqual([]);
    });
  }

  test("two keys interleaved, one after the other and all at once: each sees its own tools and pays for its own calls", async () => {
    const a = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["fx__echo"] });
    const b = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["fx__add"] });
    const list = (secret: string) =>
      rawMcp(served.url, { jsonrpc: "2.0", id: 1, method: "tools/list" }, { authorization: `Bearer ${secret}` })
        .then((r) => r.json() as Promise<{ result: { tools: { name: string }[] } }>)
        .then((j) => j.result.tools.map((x) => x.name).join(","));
    const call = (secret: string, name: string, args: Record<string, unknown>) =>
      rawMcp(served.url, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name, arguments: args } }, { authorization: `Bearer ${secret}` })
        .then((r) => r.json() as Promise<{ result: ToolResult }>)
        .then((j) => j.result);
    for (let i = 0; i < 5; i++) {
      expect(await list(a.secret)).toBe("fx__echo");
      expect(await list(b.secret)).toBe("fx__add");
      expect((await call(a.secret, "fx__echo", { text: "a" })).isError).toBeUndefined();
      expect((await call(b.secret, "fx__echo", { text: "b" })).structuredContent).toEqual({ error: "TOOL_NOT_ALLOWED" });
    }
    // 15 at once for each key: b's 5 refusals and 15 calls in flight are its 20 an hour.
    const mixed = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 === 0 ? call(a.secret, "fx__echo", { text: `a${i}` }) : call(b.secret, "fx__add", { a: i, b: 1 }))),
    );
    expect(mixed.every((r) => r.isError === undefined)).toBe(true);
    expect(mixed.map((r) => (receiptOf(r)!.receipt.key_id as string) === (mixed.indexOf(r) % 2 === 0 ? a.keyId : b.keyId)).every(Boolean)).toBe(true);
    expect(await spent(a.keyId)).toBe(20 * 1500);
    expect(await spent(b.keyId)).toBe(15 * 1500);
  });

  test("20 concurrent MCP calls on a key with room for one: exactly one charged", async () => {
    const k = await t.makeKey({ budget_mc: 1500, reset: "none", allow: ALLOW });
    await using c = await mcpClient(served.url, k.secret);
    const results = (await Promise.all(
      Array.from({ length: 20 }, (_, i) => c.client.callTool({ name: "fx__echo", arguments: { text: `n${i}` } })),
    )) as ToolResult[];
    expect(results.filter((r) => r.isError !== true)).toHaveLength(1);
    expect(results.filter((r) => r.structuredContent?.error === "BUDGET_EXHAUSTED")).toHaveLength(19);
    expect(await spent(k.keyId)).toBe(1500);
    expect((await auditOf(k.keyId)).filter((a) => a.outcome === "charged")).toHaveLength(1);
  });
});

describe("desk MCP endpoint: what is checked before the transport", () => {
  const init = {
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
  };

  test("no key → 401 KEY_INVALID with a Bearer challenge; a wrong, revoked or expired key adds error=invalid_token", async () => {
    const none = await rawMcp(served.url, init);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe('Bearer realm="ask-only desk"');
    expect(await none.json()).toEqual({ error: "KEY_INVALID" });
    const revoked = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    await t.admin("POST", `/admin/keys/${revoked.keyId}/revoke`);
    const expired = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW, expires_at: "2026-11-30T09:00:00Z" });
    for (const secret of [`cd_live_${"A".repeat(43)}`, "nonsense", revoked.secret, expired.secret]) {
      const r = await rawMcp(served.url, init, { authorization: `Bearer ${secret}` });
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toBe('Bearer realm="ask-only desk", error="invalid_token"');
      expect(await r.json()).toEqual({ error: "KEY_INVALID" });
    }
    // The SDK client sees the 401 as a failed connect.
    await expect(mcpClient(served.url, revoked.secret)).rejects.toThrow();
  });

  test("a Host or Origin of another site → 403 HOST_REFUSED, before the key is even looked at", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const auth = { authorization: `Bearer ${k.secret}` };
    const refused: Record<string, string>[] = [
      { host: "evil.example.com" },
      { host: `evil.example.com:${served.port}` },
      { host: `127.0.0.1:${served.port + 1}` },
      { host: `localhost:${served.port}`, origin: "http://evil.example.com" },
      { host: `localhost:${served.port}`, origin: `http://evil.example.com:${served.port}` },
      { host: `localhost:${served.port}`, origin: "null" },
    ];
    for (const h of refused) {
      const withKey = await rawMcp(served.url, init, { ...auth, ...h });
      expect(withKey.status).toBe(403);
      expect(await withKey.json()).toEqual({ error: "HOST_REFUSED" });
      expect((await rawMcp(served.url, init, h)).status).toBe(403);
    }
    const accepted: Record<string, string>[] = [
      { host: `localhost:${served.port}` },
      { host: `127.0.0.1:${served.port}`, origin: `http://127.0.0.1:${served.port}` },
      { host: `[::1]:${served.port}`, origin: `http://localhost:${served.port}` },
    ];
    for (const h of accepted) {
      expect((await rawMcp(served.url, init, { ...auth, ...h })).status).toBe(200);
    }
  });

  test("GET and DELETE → 405 (stateless: no stream to resume, no session to end)", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    for (const method of ["GET", "DELETE"]) {
      const r = await fetch(`${served.url}/mcp`, { method, headers: { authorization: `Bearer ${k.secret}`, accept: "text/event-stream" } });
      expect(r.status).toBe(405);
      expect(r.headers.get("allow")).toBe("POST");
      expect(await r.json()).toEqual({ error: "METHOD_NOT_ALLOWED" });
    }
  });

  test("protocol faults stay protocol errors: an unknown method is JSON-RPC -32601, a bad body a JSON-RPC parse error", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const auth = { authorization: `Bearer ${k.secret}` };
    const r = await rawMcp(served.url, { jsonrpc: "2.0", id: 7, method: "resources/list", params: {} }, auth);
    expect(((await r.json()) as { error: { code: number } }).error.code).toBe(-32601);
    const wrongShape = await rawMcp(served.url, { jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "fx__echo", arguments: ["text"] } }, auth);
    expect(((await wrongShape.json()) as { error: { code: number } }).error.code).toBe(-32602);
    expect(await spent(k.keyId)).toBe(0);
    const bad = await fetch(`${served.url}/mcp`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: "{not json",
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: number } }).error.code).toBe(-32700);
    const huge = await rawMcp(
      served.url,
      { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "fx__echo", arguments: { text: "x".repeat(1024 * 1024) } } },
      auth,
    );
    expect(huge.status).toBe(413);
    expect(await spent(k.keyId)).toBe(0);
  });
});

describe("desk MCP endpoint: the rules as functions", () => {
  test("the price sentence: exact millicents, grouped, with cents", () => {
    expect(priceSentence(0)).toBe("Price: 0 mc (0 cents) per call.");
    expect(priceSentence(1)).toBe("Price: 1 mc (0.001 cents) per call.");
    expect(priceSentence(1000)).toBe("Price: 1,000 mc (1 cent) per call.");
    expect(priceSentence(1500)).toBe("Price: 1,500 mc (1.5 cents) per call.");
    expect(priceSentence(1_234_567)).toBe("Price: 1,234,567 mc (1,234.567 cents) per call.");
  });

  test("Host: loopback and the listen name on the listening port; --allowed-host by name or name:port", () => {
    const none = new Set<string>();
    const extra = new Set(["desk.example.com", "other.example.com:8443"]);
    const cases: [string, number | undefined, string | undefined, ReadonlySet<string>, boolean][] = [
      ["localhost:8787", 8787, "127.0.0.1", none, true],
      ["LOCALHOST:8787", 8787, "127.0.0.1", none, true],
      ["[::1]:8787", 8787, "::1", none, true],
      ["localhost:8788", 8787, "127.0.0.1", none, false],
      ["localhost", 8787, "127.0.0.1", none, false],
      ["192.0.2.5:8787", 8787, "192.0.2.5", none, true],
      ["192.0.2.5:8787", 8787, "0.0.0.0", none, false],
      ["desk.example.com", 8787, "127.0.0.1", extra, true],
      ["desk.example.com:443", 8787, "127.0.0.1", extra, true],
      ["other.example.com:8443", 8787, "127.0.0.1", extra, true],
      ["other.example.com", 8787, "127.0.0.1", extra, false],
      ["evil.example.com:8787", 8787, "127.0.0.1", extra, false],
      ["localhost:8787@evil", 8787, "127.0.0.1", none, false],
      ["", 8787, "127.0.0.1", none, false],
      ["localhost:8787", undefined, "127.0.0.1", none, false],
    ];
    for (const [host, port, listen, allowed, expected] of cases) {
      expect([host, hostAllowed(host, 80, port, listen, allowed)]).toEqual([host, expected]);
    }
  });
});
