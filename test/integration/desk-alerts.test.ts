// Budget alerts through the desk (SPEC 8.17): a charge that crosses a threshold writes its alert
// in its own transaction, once per threshold, period and budget whatever the concurrency; the
// outbox in the SQLite ledger passes the AlertOutbox contract; the delivery loop sends each alert
// in the Standard Webhooks format under one id until the receiver takes it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { AlertDelivery } from "../../src/adapters/webhooks/alert-delivery.ts";
import { alertEventProblem } from "../../src/core/finance/alerts.ts";
import { newWebhookSecret, parseWebhookSecret, verifyWebhookV1a } from "../../src/core/finance/standard-webhooks.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";

const clock = manualClock("2026-11-30T12:00:00.000Z");
let fx: UpstreamFixture;
let t: TestDesk;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1000, upstreamCostMc: 100 }, { now: clock.now });
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

const db = () => t.ledger.testOnlyDatabase();
const json = async (r: Response) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> });

async function orgWithKeys(n: number, keyBody: Record<string, unknown>) {
  const { org_id } = (await (await t.admin("POST", "/admin/orgs", { name: "alerted" })).json()) as { org_id: string };
  const keys: { keyId: string; secret: string }[] = [];
  for (let i = 0; i < n; i++) {
    const r = (await (await t.admin("POST", "/admin/keys", { org_id, allow: ["fx__echo"], reset: "none", ...keyBody })).json()) as {
      key_id: string;
      secret: string;
    };
    keys.push({ keyId: r.key_id, secret: r.secret });
  }
  return { orgId: org_id, keys };
}

type AlertRowSeen = { scope: string; subject_id: string; threshold_pct: number; body: string };
const alertsOf = (orgId: string) =>
  db()
    .query("SELECT scope, subject_id, threshold_pct, body FROM alerts WHERE org_id = ? ORDER BY scope, subject_id, threshold_pct")
    .all(orgId) as AlertRowSeen[];

describe("alerts written with the charge", () => {
  test("50 concurrent charges across five keys: each threshold of each key and of the org alerts exactly once", async () => {
    const { orgId, keys } = await orgWithKeys(5, { budget_mc: 10_000 });
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 50_000, reset: "monthly" })).status).toBe(200);
    const statuses = await Promise.all(Array.from({ length: 50 }, async (_, i) => (await t.call(keys[i % 5]!.secret, "fx__echo", { text: String(i) })).status));
    expect(statuses.filter((s) => s === 200).length).toBe(50);
    const alerts = alertsOf(orgId);
    expect(alerts.map((a) => [a.scope, a.threshold_pct])).toEqual([
      ...keys
        .map((k) => k.keyId)
        .sort()
        .flatMap(() => [
          ["key", 80],
          ["key", 100],
        ]),
      ["org", 80],
      ["org", 100],
    ]);
    for (const a of alerts) expect(alertEventProblem(JSON.parse(a.body))).toBeNull();
    const org80 = JSON.parse(alerts.find((a) => a.scope === "org" && a.threshold_pct === 80)!.body);
    expect(org80.data).toMatchObject({
      scope: "org",
      org_id: orgId,
      period: "2026-11",
      threshold_mc: 40_000,
      spent_mc: 40_000,
      budget_mc: 50_000,
      cause: "charge",
    });
    // Refusals after the budget is spent reach no mark again: nothing new is written.
    for (let i = 0; i < 5; i++) expect((await t.call(keys[i]!.secret, "fx__echo", { text: "more" })).status).toBe(402);
    expect(alertsOf(orgId)).toHaveLength(12);
    expect(await t.ledger.check.money()).toEqual([]);
  });

  test("thresholds are settable per key and per org; a refusal for want of budget reaches the marks a charge could not", async () => {
    const { orgId, keys } = await orgWithKeys(1, { budget_mc: 2_500, alert_thresholds: [50, 10, 100] });
    expect((await json(await t.admin("GET", `/admin/keys/${keys[0]!.keyId}`))).body.alert_thresholds).toEqual([10, 50, 100]);
    const set = await json(await t.admin("PATCH", `/admin/orgs/${orgId}`, { alert_thresholds: [25] }));
    expect(set.body.alert_thresholds).toEqual([25]);
    expect(await json(await t.admin("PATCH", `/admin/orgs/${orgId}`, { alert_thresholds: [0] }))).toEqual({
      status: 400,
      body: { error: "VALUE_INVALID", field: "alert_thresholds" },
    });
    expect(await json(await t.admin("PATCH", `/admin/orgs/${orgId}`, { alert_thresholds: [50, 50] }))).toMatchObject({ status: 400 });
    expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 100_000, reset: "none" })).status).toBe(200);

    expect((await t.call(keys[0]!.secret, "fx__echo", { text: "1" })).status).toBe(200);
    expect(alertsOf(orgId).map((a) => [a.scope, a.threshold_pct])).toEqual([["key", 10]]);
    expect((await t.call(keys[0]!.secret, "fx__echo", { text: "2" })).status).toBe(200);
    expect(alertsOf(orgId).map((a) => [a.scope, a.threshold_pct])).toEqual([
      ["key", 10],
      ["key", 50],
    ]);
    // 2,000 of 2,500 spent: the next call cannot be paid, so the key is as spent as its budget.
    const refused = await json(await t.call(keys[0]!.secret, "fx__echo", { text: "3" }));
    expect(refused.body.receipt).toMatchObject({ receipt: { outcome: "refused_budget" } });
    const hundred = alertsOf(orgId).find((a) => a.threshold_pct === 100)!;
    expect(JSON.parse(hundred.body).data).toMatchObject({ cause: "refusal", spent_mc: 2_000, remaining_mc: 500 });

    const listed = (await json(await t.admin("GET", `/admin/alerts?org_id=${orgId}`))).body as unknown as { threshold_pct: number; state: string }[];
    expect(listed.map((a) => [a.threshold_pct, a.state])).toEqual([
      [100, "pending"],
      [50, "pending"],
      [10, "pending"],
    ]);
    // What an alert says is fixed once written, and alerts are never deleted.
    expect(() => db().query("UPDATE alerts SET body = '{}' WHERE org_id = ?").run(orgId)).toThrow(/fixed/);
    expect(() => db().query("DELETE FROM alerts WHERE org_id = ?").run(orgId)).toThrow(/kept/);
  });
});

describe("delivery from the ledger's outbox", () => {
  test("a receiver that fails twice gets the alert a third time under the same id, signed v1 and v1a", async () => {
    // A desk of its own: its outbox holds this alert alone.
    await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1000, upstreamCostMc: 100 });
    const { org_id: orgId } = (await (await t.admin("POST", "/admin/orgs", { name: "alerted" })).json()) as { org_id: string };
    const key = (await (
      await t.admin("POST", "/admin/keys", { org_id: orgId, allow: ["fx__echo"], reset: "none", budget_mc: 1_000, alert_thresholds: [100] })
    ).json()) as {
      secret: string;
    };
    expect((await t.call(key.secret, "fx__echo", { text: "all" })).status).toBe(200);
    const secretText = newWebhookSecret();
    const seen: { headers: Record<string, string>; body: string }[] = [];
    const { promise: delivered, resolve } = Promise.withResolvers<void>();
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(req) {
        seen.push({ headers: Object.fromEntries(req.headers), body: await req.text() });
        return seen.length < 3 ? new Response("down", { status: 503 }) : new Response(null, { status: 204 });
      },
    });
    const delivery = new AlertDelivery({
      url: new URL(`http://127.0.0.1:${server.port}/alerts`),
      secret: parseWebhookSecret(secretText),
      signer: t.desk.signer,
      outbox: t.ledger.alerts,
      schedule: [1, 1],
      pollMs: 5,
      onAttempt: (r) => {
        if (r.ok) resolve();
      },
    });
    delivery.start();
    try {
      await delivered;
    } finally {
      await delivery.stop();
      server.stop(true);
    }
    const ids = new Set(seen.map((s) => s.headers["webhook-id"]));
    expect(ids.size).toBe(1);
    const jwks = await t.desk.jwks();
    for (const s of seen) {
      expect(() => new Webhook(secretText).verify(s.body, s.headers)).not.toThrow();
      expect(verifyWebhookV1a(s.headers, s.body, jwks, Date.now()).ok).toBe(true);
    }
    const [row] = (await json(await t.admin("GET", `/admin/alerts?org_id=${orgId}`))).body as unknown as {
      alert_id: string;
      state: string;
      attempts: number;
    }[];
    expect(row).toMatchObject({ alert_id: [...ids][0], state: "delivered", attempts: 2 });
  });
});
