// Organization budgets (SPEC 8.16) through the fetch handler against a real upstream: every key
// of an org draws on the org's budget as well as its own, checked in the one reservation
// statement, so no interleaving of calls across the org's keys passes either; refunds go back to
// the key's and the org's own periods; each change of the budget is a signed record in the org's
// chain, and a top-up counts once per reference.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { openOrgRecord, orgChainProblems } from "../../src/core/finance/org-records.ts";
import { openEnvelope, ReceiptKeys } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";

const NOON = "2026-11-30T12:00:00.000Z";
const clock = manualClock(NOON);
let fx: UpstreamFixture;
let t: TestDesk;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo", "fx__hang", "fx__fail_5xx"], priceMc: 1000, upstreamCostMc: 100 }, { now: clock.now });
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

const json = async (r: Response) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> });

async function newOrg(): Promise<string> {
  return ((await (await t.admin("POST", "/admin/orgs", { name: "finance" })).json()) as { org_id: string }).org_id;
}

async function keyOf(orgId: string, body: Record<string, unknown>): Promise<{ keyId: string; secret: string }> {
  const r = await t.admin("POST", "/admin/keys", { org_id: orgId, allow: ["fx__echo", "fx__hang", "fx__fail_5xx"], ...body });
  expect(r.status).toBe(201);
  const k = (await r.json()) as { key_id: string; secret: string };
  return { keyId: k.key_id, secret: k.secret };
}

const db = () => t.ledger.testOnlyDatabase();

describe("the org budget in the reservation", () => {
  test("three keys of one org, 300 concurrent calls, an org budget for 50: exactly 50 charged, and each key's own budget holds", async () => {
    clock.set(NOON);
    const orgId = await newOrg();
    const keys = [await keyOf(orgId, { budget_mc: 30_000, reset: "none" }), await keyOf(orgId, { budget_mc: 30_000, reset: "none" })];
    // A key whose own budget is smaller than its share: its refusals name the key's budget. (A
    // key has at most 20 calls in flight, SPEC 8.3, so the three keys can reach 20 + 20 + 15.)
    keys.push(await keyOf(orgId, { budget_mc: 15_000, reset: "none" }));
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 50_999, reset: "monthly" })).status).toBe(200);
    const before = fx.calls.get("echo") ?? 0;

    const calls = Array.from({ length: 300 }, (_, i) => t.call(keys[i % 3]!.secret, "fx__echo", { text: String(i) }));
    const answers = await Promise.all(calls.map(async (p) => json(await p)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 200).length).toBe(50);
    expect(statuses.every((s) => s === 200 || s === 402 || s === 429)).toBe(true);
    expect(fx.calls.get("echo")).toBe(before + 50);

    const perKey = keys.map(
      (k) => (db().query("SELECT coalesce(sum(amount_mc), 0) AS mc FROM receipts WHERE key_id = ? AND outcome = 'charged'").get(k.keyId) as { mc: number }).mc,
    );
    expect(perKey.reduce((n, mc) => n + mc, 0)).toBe(50_000);
    expect(perKey[2]).toBeLessThanOrEqual(15_000);
    for (const [i, k] of keys.entries()) expect((await t.ledger.keys.get(k.keyId))!.spentMc).toBeLessThanOrEqual(i === 2 ? 15_000 : 30_000);
    expect(db().query("SELECT budget_mc, period, spent_mc FROM org_budgets WHERE org_id = ?").get(orgId)).toEqual({
      budget_mc: 50_999,
      period: "2026-11",
      spent_mc: 50_000,
    });
    // Every 402 carries a signed receipt saying whose budget was short.
    const refused = answers.filter((a) => a.status === 402);
    expect(refused.length).toBeGreaterThan(0);
    const outcomes = new Set(refused.map((a) => (a.body.receipt as { receipt: { outcome: string } }).receipt.outcome));
    expect(outcomes.has("refused_org_budget")).toBe(true);
    for (const a of refused) expect(a.body.error).toBe("BUDGET_EXHAUSTED");
    expect(await t.ledger.check.money()).toEqual([]);
  }, 60_000);

  test("a 402 names the org's budget when the key has room, the key's when the key has none", async () => {
    clock.set(NOON);
    const orgId = await newOrg();
    const rich = await keyOf(orgId, { budget_mc: 10_000, reset: "none" });
    const poor = await keyOf(orgId, { budget_mc: 999, reset: "none" });
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 1_500, reset: "none" })).status).toBe(200);

    const ok = await t.call(rich.secret, "fx__echo", { text: "a" });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-clearing-remaining-mc")).toBe("500");
    const orgShort = await json(await t.call(rich.secret, "fx__echo", { text: "b" }));
    expect(orgShort.status).toBe(402);
    expect(orgShort.body.receipt).toMatchObject({ receipt: { outcome: "refused_org_budget", http_status: 402, amount_mc: 0, remaining_mc: 500 } });
    const keyShort = await json(await t.call(poor.secret, "fx__echo", { text: "c" }));
    expect(keyShort.body.receipt).toMatchObject({ receipt: { outcome: "refused_budget", remaining_mc: 500 } });
    const jwks = await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json();
    const opened = openEnvelope(orgShort.body.receipt, ReceiptKeys.fromJwks(jwks));
    expect(opened.checks.every((c) => c.ok)).toBe(true);
    expect(opened.signed?.outcome).toBe("refused_org_budget");

    // A top-up makes room at once; an unlimited budget keeps counting, so a budget set later starts from it.
    expect((await t.admin("POST", `/admin/orgs/${orgId}/topups`, { amount_mc: 1_000, reference: "inv-1" })).status).toBe(201);
    expect((await t.call(rich.secret, "fx__echo", { text: "d" })).status).toBe(200);
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: null })).status).toBe(200);
    expect((await t.call(rich.secret, "fx__echo", { text: "e" })).status).toBe(200);
    expect(await json(await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 2_999 }))).toEqual({
      status: 400,
      body: { error: "VALUE_INVALID", field: "budget_mc" },
    });
    expect((await json(await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 3_000 }))).body.budget).toEqual({
      budget_mc: 3_000,
      reset: "none",
      period: "none",
      spent_mc: 3_000,
      remaining_mc: 0,
    });
    expect((await json(await t.call(rich.secret, "fx__echo", { text: "f" }))).body.receipt).toMatchObject({ receipt: { outcome: "refused_org_budget" } });
    expect(await t.ledger.check.money()).toEqual([]);
  });

  test("an org's first budget counts what its period already spent, reservations in flight included, and their refunds go back", async () => {
    clock.set(NOON);
    const orgId = await newOrg();
    const k = await keyOf(orgId, { budget_mc: 10_000, reset: "none" });
    expect((await t.call(k.secret, "fx__echo", { text: "before" })).status).toBe(200);
    const hanging = fx.hanging();
    const hung = t.call(k.secret, "fx__hang", {});
    await fx.whenHanging(hanging + 1);
    const set = await json(await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 5_000, reset: "daily" }));
    expect(set.body.budget).toMatchObject({ spent_mc: 2_000, remaining_mc: 3_000, period: "2026-11-30" });
    // Refunded as abandoned while the upstream still holds it: the price goes back to the org too.
    expect(await t.desk.sweepAbandoned(Number.POSITIVE_INFINITY)).toBeGreaterThanOrEqual(1);
    fx.release();
    expect((await hung).status).toBe(504);
    expect((await json(await t.admin("GET", `/admin/orgs/${orgId}`))).body.budget).toMatchObject({ spent_mc: 1_000, remaining_mc: 4_000 });
    expect(await t.ledger.check.money()).toEqual([]);
  });

  test("a refund across midnight goes back to the key's and the org's old periods, never into the new ones", async () => {
    clock.set("2026-11-30T23:59:59.000Z");
    const orgId = await newOrg();
    const k = await keyOf(orgId, { budget_mc: 10_000, reset: "daily" });
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 10_000, reset: "daily" })).status).toBe(200);
    expect((await t.call(k.secret, "fx__echo", { text: "old day" })).status).toBe(200);
    const hanging = fx.hanging();
    const hung = t.call(k.secret, "fx__hang", {});
    await fx.whenHanging(hanging + 1);

    clock.set("2026-12-01T00:00:01.000Z");
    expect((await t.call(k.secret, "fx__echo", { text: "new day" })).status).toBe(200);
    expect(await t.desk.sweepAbandoned(Number.POSITIVE_INFINITY)).toBeGreaterThanOrEqual(1);
    fx.release();
    expect((await hung).status).toBe(504);

    expect(db().query("SELECT period, spent_mc FROM spend WHERE key_id = ? ORDER BY period").all(k.keyId)).toEqual([
      { period: "2026-11-30", spent_mc: 1_000 },
      { period: "2026-12-01", spent_mc: 1_000 },
    ]);
    expect(db().query("SELECT period, spent_mc FROM org_spend WHERE org_id = ? ORDER BY period").all(orgId)).toEqual([
      { period: "2026-11-30", spent_mc: 1_000 },
      { period: "2026-12-01", spent_mc: 1_000 },
    ]);
    expect(db().query("SELECT period, spent_mc FROM org_budgets WHERE org_id = ?").get(orgId)).toEqual({ period: "2026-12-01", spent_mc: 1_000 });
    expect((await t.ledger.keys.get(k.keyId))!.spentMc).toBe(1_000);
    // A refund within the period lowers the org's spend at once.
    expect((await t.call(k.secret, "fx__fail_5xx", {})).status).toBe(502);
    expect(db().query("SELECT spent_mc FROM org_budgets WHERE org_id = ?").get(orgId)).toEqual({ spent_mc: 1_000 });
    expect(await t.ledger.check.money()).toEqual([]);
    clock.set(NOON);
  });

  test("a clock stepping back behind the org's period refuses, and reopens nothing", async () => {
    clock.set("2026-12-01T00:00:01.000Z");
    const orgId = await newOrg();
    const k = await keyOf(orgId, { budget_mc: 10_000, reset: "none" });
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 10_000, reset: "daily" })).status).toBe(200);
    expect((await t.call(k.secret, "fx__echo", { text: "today" })).status).toBe(200);
    clock.set("2026-11-30T23:59:59.000Z");
    expect((await json(await t.call(k.secret, "fx__echo", { text: "yesterday" }))).body.receipt).toMatchObject({ receipt: { outcome: "refused_org_budget" } });
    expect(db().query("SELECT period, spent_mc FROM org_budgets WHERE org_id = ?").get(orgId)).toEqual({ period: "2026-12-01", spent_mc: 1_000 });
    clock.set(NOON);
  });
});

describe("PATCH /admin/orgs/{id}", () => {
  test("the first budget needs its reset, which is fixed after it; unknown orgs and bad values are refused", async () => {
    const orgId = await newOrg();
    const patch = async (body: unknown, id = orgId) => json(await t.admin("PATCH", `/admin/orgs/${id}`, body));
    expect(await patch({ budget_mc: 1000 })).toEqual({ status: 400, body: { error: "FIELD_MISSING", field: "reset" } });
    expect(await patch({ reset: "daily" })).toEqual({ status: 400, body: { error: "FIELD_MISSING", field: "budget_mc" } });
    expect(await patch({ budget_mc: -1, reset: "daily" })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "budget_mc" } });
    expect(await patch({ budget_mc: 1.5, reset: "daily" })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "budget_mc" } });
    expect(await patch({ budget_mc: 1000, reset: "weekly" })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "reset" } });
    expect(await patch({ budget_mc: 1000, reset: "daily", name: "x" })).toEqual({ status: 400, body: { error: "FIELD_UNKNOWN", field: "name" } });
    expect(await patch({ budget_mc: 1000, reset: "daily" }, "org_nope")).toEqual({ status: 404, body: { error: "ORG_UNKNOWN" } });
    expect((await json(await t.admin("GET", "/admin/orgs/org_nope"))).status).toBe(404);
    expect((await json(await t.admin("GET", `/admin/orgs/${orgId}`))).body.budget).toBeNull();

    const first = await patch({ budget_mc: 1000, reset: "daily" });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ org_id: orgId, budget: { budget_mc: 1000, reset: "daily", spent_mc: 0, remaining_mc: 1000 } });
    expect(first.body.record).toMatchObject({ record: { type: "budget_set", seq: 1, prev_sha256: null, budget_mc: 1000, reset: "daily", org_id: orgId } });
    expect(await patch({ budget_mc: 2000, reset: "monthly" })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "reset" } });
    expect((await patch({ budget_mc: 2000, reset: "daily" })).body.record).toMatchObject({ record: { seq: 2, budget_mc: 2000 } });
    // The same budget again changes nothing and writes no record.
    expect((await patch({ budget_mc: 2000 })).body.record).toBeNull();
    expect(db().query("SELECT count(*) AS n FROM org_records WHERE org_id = ?").get(orgId)).toEqual({ n: 2 });
  });
});

describe("top-ups", () => {
  test("idempotent by reference: the same amount counts once, another amount is 409, and the records chain and verify", async () => {
    const orgId = await newOrg();
    const topup = async (body: unknown, id = orgId) => json(await t.admin("POST", `/admin/orgs/${id}/topups`, body));
    // Nothing to add to before a budget is set.
    expect(await topup({ amount_mc: 1000, reference: "inv-1" })).toEqual({ status: 409, body: { error: "TOPUP_CONFLICT" } });
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 0, reset: "none" })).status).toBe(200);

    const first = await topup({ amount_mc: 5000, reference: "inv-1" });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      added: true,
      budget: { budget_mc: 5000 },
      record: { record: { type: "topup", amount_mc: 5000, budget_mc: 5000, reference: "inv-1", seq: 2 } },
    });
    const again = await topup({ amount_mc: 5000, reference: "inv-1" });
    expect(again.status).toBe(200);
    expect(again.body.added).toBe(false);
    expect(again.body.record).toEqual(first.body.record);
    expect(await topup({ amount_mc: 5001, reference: "inv-1" })).toEqual({ status: 409, body: { error: "TOPUP_CONFLICT" } });
    // Concurrent retries of one top-up still count once.
    const burst = await Promise.all(Array.from({ length: 20 }, () => topup({ amount_mc: 700, reference: "inv-2" })));
    expect(burst.filter((b) => b.status === 201).length).toBe(1);
    expect(burst.filter((b) => b.status === 200).length).toBe(19);
    expect((await json(await t.admin("GET", `/admin/orgs/${orgId}`))).body.budget).toMatchObject({ budget_mc: 5700 });

    expect(await topup({ amount_mc: 0, reference: "inv-3" })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "amount_mc" } });
    expect(await topup({ amount_mc: 10, reference: "has space" })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "reference" } });
    expect(await topup({ amount_mc: 10 })).toEqual({ status: 400, body: { error: "FIELD_MISSING", field: "reference" } });
    expect(await topup({ amount_mc: Number.MAX_SAFE_INTEGER, reference: "huge" })).toEqual({
      status: 400,
      body: { error: "VALUE_INVALID", field: "amount_mc" },
    });
    expect(await topup({ amount_mc: 10, reference: "x" }, "org_nope")).toEqual({ status: 404, body: { error: "ORG_UNKNOWN" } });

    const lines = await (await t.admin("GET", `/admin/orgs/${orgId}/records`)).text();
    const jwks = await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json();
    const keys = ReceiptKeys.fromJwks(jwks);
    const opened = lines
      .trim()
      .split("\n")
      .map((l) => openOrgRecord(JSON.parse(l), keys));
    expect(opened.map((o) => o.ok)).toEqual([true, true, true]);
    const chain = opened.map((o) => (o.ok ? { record: o.record, payloadSha256: o.payloadSha256 } : null)!);
    expect(orgChainProblems(chain, orgId)).toEqual([]);
    expect(chain.map((c) => c.record.type)).toEqual(["budget_set", "topup", "topup"]);
    // The records are append-only, raw SQL included.
    expect(() => db().query("UPDATE org_records SET amount_mc = 1 WHERE org_id = ?").run(orgId)).toThrow(/append-only/);
    expect(() => db().query("DELETE FROM org_records WHERE org_id = ?").run(orgId)).toThrow(/append-only/);
  });
});
