// Every step of the clearing path through the desk's fetch handler against a real MCP upstream:
// status, x-clearing-* headers, the signed receipt, the ledger, and the upstream's own call
// counter (which proves the desk never called it on 401/404/400/403/402).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Jwks, verifyChain, verifyResponse } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";

const clock = manualClock("2026-11-30T10:00:00.000Z");
let fx: UpstreamFixture;
let t: TestDesk;
let jwks: Jwks;

const ALLOW = ["fx__echo", "fx__fail_5xx", "fx__fail_transport", "fx__hang", "fx__refuse", "fx__refuse_result", "fx__tool_error"];

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: [...ALLOW, "fx__add"], priceMc: 1000, upstreamCostMc: 400 }, { now: clock.now, upstreamTimeoutMs: 400 });
  jwks = (await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json()) as Jwks;
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

function headersOf(r: Response) {
  return {
    outcome: r.headers.get("x-clearing-outcome"),
    price: r.headers.get("x-clearing-price-mc"),
    remaining: r.headers.get("x-clearing-remaining-mc"),
    receipt: r.headers.get("x-clearing-receipt-id"),
  };
}

const spent = async (keyId: string) => (await t.ledger.keys.get(keyId))!.spentMc;
const auditOf = (keyId: string) => t.ledger.records.audit({ orgId: null, keyId, sinceMs: null, limit: 100 });

async function expectNoUpstreamCall<T>(fn: () => Promise<T>): Promise<T> {
  const before = fx.totalCalls();
  const out = await fn();
  expect(fx.totalCalls()).toBe(before);
  return out;
}

describe("clearing path over REST", () => {
  test("step 1: a missing, malformed, unknown, revoked or expired key gets 401 KEY_INVALID", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const expired = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW, expires_at: "2026-11-30T09:59:59Z" });
    expect((await t.admin("POST", `/admin/keys/${k.keyId}/revoke`)).status).toBe(200);
    const unknown = `cd_live_${"A".repeat(43)}`;
    await expectNoUpstreamCall(async () => {
      for (const secret of ["", "not-a-key", unknown, k.secret, expired.secret]) {
        const r = await t.call(secret, "fx__echo", { text: "hi" });
        expect(r.status).toBe(401);
        expect(await r.json()).toEqual({ error: "KEY_INVALID" });
        expect(headersOf(r)).toEqual({ outcome: "refused_key_invalid", price: "0", remaining: "0", receipt: null });
      }
    });
    expect(await spent(k.keyId)).toBe(0);
  });

  test("step 7: success charges the price and returns the result with a receipt that verifies", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const args = { text: "hello desk" };
    const before = fx.calls.get("echo") ?? 0;
    const r = await t.call(k.secret, "fx__echo", args);
    expect(r.status).toBe(200);
    const body = (await r.json()) as { result: unknown; receipt: { receipt: Record<string, unknown> } };
    expect(body.result).toEqual({ content: [{ type: "text", text: "hello desk" }] });
    expect(headersOf(r)).toEqual({ outcome: "charged", price: "1000", remaining: "4000", receipt: body.receipt.receipt.id as string });
    expect(body.receipt.receipt).toMatchObject({
      outcome: "charged",
      http_status: 200,
      price_mc: 1000,
      amount_mc: 1000,
      upstream_cost_mc: 400,
      remaining_mc: 4000,
      period: "none",
      org_id: k.orgId,
      key_id: k.keyId,
      tool: "fx__echo",
      seq: 1,
      prev_sha256: null,
      issued_at: "2026-11-30T10:00:00.000Z",
    });
    expect(verifyResponse(body, jwks, args).every((c) => c.ok)).toBe(true);
    expect(fx.calls.get("echo")).toBe(before + 1);
    expect(await spent(k.keyId)).toBe(1000);
    expect(await auditOf(k.keyId)).toEqual([
      expect.objectContaining({ outcome: "charged", httpStatus: 200, priceMc: 1000, upstreamCostMc: 400, marginMc: 600, receiptId: body.receipt.receipt.id }),
    ]);
  });

  test("step 3: an unknown tool gets 404 with nothing charged and no upstream call", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const r = await expectNoUpstreamCall(() => t.call(k.secret, "fx__nope", {}));
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({ error: "TOOL_UNKNOWN" });
    expect(headersOf(r)).toEqual({ outcome: "refused_tool_unknown", price: "0", remaining: "5000", receipt: null });
    expect(await spent(k.keyId)).toBe(0);
    expect((await auditOf(k.keyId)).map((a) => a.outcome)).toEqual(["refused_tool_unknown"]);
  });

  test("step 3: arguments that break the schema get 400 with paths and rules, never the values", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const secretish = "sk-live-DO-NOT-ECHO-".repeat(60);
    const r = await expectNoUpstreamCall(() => t.call(k.secret, "fx__echo", { text: secretish, extra: "SECOND-VALUE" }));
    expect(r.status).toBe(400);
    const text = await r.text();
    expect(text).not.toContain("DO-NOT-ECHO");
    expect(text).not.toContain("SECOND-VALUE");
    expect(JSON.parse(text)).toEqual({
      error: "ARGS_INVALID",
      problems: [
        { path: "/", rule: "additionalProperties" },
        { path: "/text", rule: "maxLength" },
      ],
    });
    expect(headersOf(r)).toEqual({ outcome: "refused_args_invalid", price: "1000", remaining: "5000", receipt: null });
    const missing = await expectNoUpstreamCall(() => t.call(k.secret, "fx__echo", {}));
    expect(await missing.json()).toEqual({ error: "ARGS_INVALID", problems: [{ path: "/text", rule: "required" }] });
    const notObject = await expectNoUpstreamCall(() => t.call(k.secret, "fx__echo", ["text"]));
    expect(await notObject.json()).toEqual({ error: "ARGS_INVALID", problems: [{ path: "/", rule: "type" }] });
    expect(await spent(k.keyId)).toBe(0);
  });

  test("step 3: arguments with no RFC 8785 form get 400 canonical_json at a JSON Pointer that never holds the offending key", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: [...ALLOW, "fx__add"] });
    // fx__add's schema lets extra properties through, so the canonical form is what refuses them.
    const loneValue = await expectNoUpstreamCall(() => t.call(k.secret, "fx__add", { a: 1, b: 2, list: [0, { "x/y": "\ud800" }] }));
    expect([loneValue.status, await loneValue.json()]).toEqual([400, { error: "ARGS_INVALID", problems: [{ path: "/list/1/x~1y", rule: "canonical_json" }] }]);
    const loneKey = await expectNoUpstreamCall(() => t.call(k.secret, "fx__add", { a: 1, b: 2, nested: { "sk-DO-NOT-ECHO-\udbff": 1 } }));
    const text = await loneKey.text();
    expect(text).not.toContain("DO-NOT-ECHO");
    expect([loneKey.status, JSON.parse(text)]).toEqual([400, { error: "ARGS_INVALID", problems: [{ path: "/nested", rule: "canonical_json" }] }]);
    expect(await spent(k.keyId)).toBe(0);
  });

  test("step 4: a tool off the allowlist gets 403 with a signed receipt and no upstream call", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo"] });
    const r = await expectNoUpstreamCall(() => t.call(k.secret, "fx__add", { a: 1, b: 2 }));
    expect(r.status).toBe(403);
    const body = (await r.json()) as { error: string; receipt: { receipt: Record<string, unknown> } };
    expect(body.error).toBe("TOOL_NOT_ALLOWED");
    expect(body.receipt.receipt).toMatchObject({
      outcome: "refused_not_allowed",
      http_status: 403,
      price_mc: 1000,
      amount_mc: 0,
      result_sha256: null,
      remaining_mc: 5000,
    });
    expect(headersOf(r)).toEqual({ outcome: "refused_not_allowed", price: "1000", remaining: "5000", receipt: body.receipt.receipt.id as string });
    expect(verifyResponse(body, jwks, { a: 1, b: 2 }).every((c) => c.ok)).toBe(true);
    expect(await spent(k.keyId)).toBe(0);
  });

  test("step 5: no room in the budget gets 402 with a signed receipt and no upstream call", async () => {
    const k = await t.makeKey({ budget_mc: 1500, reset: "none", allow: ALLOW });
    expect((await t.call(k.secret, "fx__echo", { text: "a" })).status).toBe(200);
    const r = await expectNoUpstreamCall(() => t.call(k.secret, "fx__echo", { text: "b" }));
    expect(r.status).toBe(402);
    const body = (await r.json()) as { error: string; receipt: { receipt: Record<string, unknown> } };
    expect(body.error).toBe("BUDGET_EXHAUSTED");
    expect(body.receipt.receipt).toMatchObject({ outcome: "refused_budget", http_status: 402, amount_mc: 0, remaining_mc: 500, seq: 2 });
    expect(headersOf(r)).toMatchObject({ outcome: "refused_budget", price: "1000", remaining: "500" });
    expect(await spent(k.keyId)).toBe(1000);
  });

  test("a per-key price overrides the tool's default price", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW, prices: { fx__echo: 250 } });
    const r = await t.call(k.secret, "fx__echo", { text: "cheap" });
    expect(headersOf(r)).toMatchObject({ outcome: "charged", price: "250", remaining: "4750" });
  });

  const refunds = [
    { tool: "fx__fail_5xx", upstream: "fail_5xx", args: {}, status: 502, error: "UPSTREAM_ERROR", outcome: "refunded_upstream_error" },
    { tool: "fx__fail_transport", upstream: "fail_transport", args: {}, status: 502, error: "UPSTREAM_ERROR", outcome: "refunded_upstream_error" },
    { tool: "fx__hang", upstream: "hang", args: {}, status: 504, error: "UPSTREAM_TIMEOUT", outcome: "refunded_timeout" },
    { tool: "fx__refuse", upstream: "refuse", args: { text: "x" }, status: 400, error: "ARGS_REFUSED", outcome: "refunded_args_refused" },
    { tool: "fx__refuse_result", upstream: "refuse_result", args: { text: "x" }, status: 400, error: "ARGS_REFUSED", outcome: "refunded_args_refused" },
    { tool: "fx__tool_error", upstream: "tool_error", args: {}, status: 502, error: "TOOL_FAILED", outcome: "refunded_upstream_error" },
  ] as const;
  for (const c of refunds) {
    test(`step 6: ${c.upstream} → ${c.status} ${c.error}, refunded with a signed ${c.outcome} receipt`, async () => {
      const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
      const before = fx.calls.get(c.upstream) ?? 0;
      const r = await t.call(k.secret, c.tool, c.args);
      expect(r.status).toBe(c.status);
      const body = (await r.json()) as { error: string; receipt: { receipt: Record<string, unknown> }; result?: unknown };
      expect(body.error).toBe(c.error);
      expect(body.result).toBeUndefined();
      expect(body.receipt.receipt).toMatchObject({
        outcome: c.outcome,
        http_status: c.status,
        price_mc: 1000,
        amount_mc: 0,
        result_sha256: null,
        remaining_mc: 5000,
      });
      expect(headersOf(r)).toEqual({ outcome: c.outcome, price: "1000", remaining: "5000", receipt: body.receipt.receipt.id as string });
      expect(verifyResponse(body, jwks, c.args).every((x) => x.ok)).toBe(true);
      expect(fx.calls.get(c.upstream)).toBe(before + 1);
      expect(await spent(k.keyId)).toBe(0);
      expect(await t.ledger.check.money()).toEqual([]);
    });
  }

  test("step 6: an upstream that stopped listening → 502 refunded; back on its port, the desk reconnects", async () => {
    const first = startUpstreamFixture();
    expect((await t.admin("POST", "/admin/upstreams", { name: "gone", url: first.url })).status).toBe(201);
    expect((await t.admin("PUT", "/admin/tools/gone__echo", { price_mc: 1000, upstream_cost_mc: 0 })).status).toBe(200);
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["gone__echo"] });
    expect((await t.call(k.secret, "gone__echo", { text: "1" })).status).toBe(200);
    await first.stop();
    const r = await t.call(k.secret, "gone__echo", { text: "2" });
    expect(r.status).toBe(502);
    expect(await r.json()).toMatchObject({ error: "UPSTREAM_ERROR" });
    expect(headersOf(r)).toMatchObject({ outcome: "refunded_upstream_error", price: "1000", remaining: "4000" });
    expect(await spent(k.keyId)).toBe(1000);
    await using again = startUpstreamFixture({ port: first.port });
    const back = await t.call(k.secret, "gone__echo", { text: "3" });
    expect(back.status).toBe(200);
    expect(again.calls.get("echo")).toBe(1);
    expect(await spent(k.keyId)).toBe(2000);
  });

  test("one call's upstream failure does not disturb the calls in flight beside it", async () => {
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ALLOW });
    const calls = Array.from({ length: 16 }, (_, i) =>
      i % 4 === 0
        ? t.call(k.secret, "fx__fail_5xx", {})
        : i % 4 === 1
          ? t.call(k.secret, "fx__fail_transport", {})
          : t.call(k.secret, "fx__echo", { text: String(i) }),
    );
    const statuses = (await Promise.all(calls)).map((r) => r.status);
    expect(statuses).toEqual(Array.from({ length: 16 }, (_, i) => (i % 4 < 2 ? 502 : 200)));
    expect(await spent(k.keyId)).toBe(8 * 1000);
    expect(await t.ledger.check.money()).toEqual([]);
  });

  test("step 2: after 20 failed calls in one UTC hour the key gets 429 until the hour ends", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    for (let i = 0; i < 20; i++) expect((await t.call(k.secret, "fx__nope", {})).status).toBe(404);
    const r = await expectNoUpstreamCall(() => t.call(k.secret, "fx__echo", { text: "x" }));
    expect(r.status).toBe(429);
    expect(await r.json()).toEqual({ error: "TOO_MANY_FAILURES" });
    expect(headersOf(r)).toMatchObject({ outcome: "refused_rate_limited", remaining: "5000" });
    const saved = clock.now();
    clock.set("2026-11-30T11:00:00.000Z");
    try {
      expect((await t.call(k.secret, "fx__echo", { text: "x" })).status).toBe(200);
    } finally {
      clock.set(new Date(saved).toISOString());
    }
  });

  test("each key's receipts form a hash chain in the export, and desk check finds the ledger sound", async () => {
    const k = await t.makeKey({ budget_mc: 2500, reset: "none", allow: ["fx__echo", "fx__tool_error"] });
    await t.call(k.secret, "fx__echo", { text: "1" });
    await t.call(k.secret, "fx__tool_error", {});
    await t.call(k.secret, "fx__add", { a: 1, b: 1 });
    await t.call(k.secret, "fx__echo", { text: "2" });
    await t.call(k.secret, "fx__echo", { text: "3" });
    const exported = await t.admin("GET", `/admin/receipts?org_id=${k.orgId}`);
    expect(exported.headers.get("content-type")).toBe("application/x-ndjson");
    const lines = (await exported.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const mine = lines.filter((e) => e.receipt.key_id === k.keyId);
    expect(mine.map((e) => [e.receipt.seq, e.receipt.outcome])).toEqual([
      [1, "charged"],
      [2, "refunded_upstream_error"],
      [3, "refused_not_allowed"],
      [4, "charged"],
      [5, "refused_budget"],
    ]);
    expect(verifyChain(lines)).toEqual({ keys: expect.any(Number), failures: [] });
    const { checkLedger } = await import("../../src/core/desk/check.ts");
    expect((await checkLedger(t.ledger)).problems).toEqual([]);
  });

  test("a reservation abandoned past the timeout is refunded by the sweep with a signed receipt", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const hangingBefore = fx.hanging();
    const pending = t.call(k.secret, "fx__hang", {});
    await fx.whenHanging(hangingBefore + 1);
    expect(await spent(k.keyId)).toBe(1000);
    clock.advance(60_000);
    expect(await t.desk.sweepStale()).toBe(1);
    clock.advance(-60_000);
    expect(await spent(k.keyId)).toBe(0);
    const r = await pending;
    expect(r.status).toBe(504);
    const body = (await r.json()) as { receipt: { receipt: Record<string, unknown> } };
    expect(body.receipt.receipt).toMatchObject({ outcome: "refunded_abandoned", amount_mc: 0, key_id: k.keyId });
    expect(await t.ledger.check.money()).toEqual([]);
  });

  test("a fault of the desk's own (the ledger refusing the reservation) is 500 INTERNAL with the clearing headers, nothing more, and nothing moves", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ALLOW });
    const CAUSE = "ledger-fault-7c1e: disk on fire";
    t.ledger.testOnlyDatabase().run(`CREATE TRIGGER planted_fault BEFORE INSERT ON reservations BEGIN SELECT RAISE(ABORT, '${CAUSE}'); END`);
    try {
      const r = await expectNoUpstreamCall(() => t.call(k.secret, "fx__echo", { text: "x" }));
      // The cause goes to the desk's log only: the agent gets the code and the headers.
      expect([r.status, await r.text()]).toEqual([500, '{"error":"INTERNAL"}']);
      expect(headersOf(r)).toEqual({ outcome: "internal_error", price: "0", remaining: "0", receipt: null });
      expect(t.logs.some((l) => l.includes(CAUSE))).toBe(true);
    } finally {
      t.ledger.testOnlyDatabase().run("DROP TRIGGER planted_fault");
    }
    // The conditional UPDATE rolled back with the failed insert: the budget is whole.
    expect(await spent(k.keyId)).toBe(0);
    expect(await t.ledger.check.money()).toEqual([]);
    expect((await t.call(k.secret, "fx__echo", { text: "after" })).status).toBe(200);
  });
});
