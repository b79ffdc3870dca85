// A budget change is checked against the spend of the key's current period at the moment of
// the PATCH (the period the next reservation would use), never against the period of the last
// call: right after midnight a daily key has spent nothing today, whatever it spent yesterday.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";

const clock = manualClock("2026-11-30T23:59:58.000Z");
let fx: UpstreamFixture;
let t: TestDesk;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo", "fx__hang"], priceMc: 1000, upstreamCostMc: 0 }, { now: clock.now });
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

const patch = async (keyId: string, body: unknown) => {
  const r = await t.admin("PATCH", `/admin/keys/${keyId}`, body);
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};

describe("PATCH budget_mc across a reset", () => {
  for (const [reset, before, after, oldPeriod, newPeriod] of [
    ["daily", "2026-11-30T23:59:58.000Z", "2026-12-01T00:00:01.000Z", "2026-11-30", "2026-12-01"],
    ["monthly", "2026-11-30T23:59:58.000Z", "2026-12-01T00:00:01.000Z", "2026-11", "2026-12"],
  ] as const) {
    test(`${reset}: after the reset a budget below the last period's spend is accepted; this period's spend still binds`, async () => {
      clock.set(before);
      const k = await t.makeKey({ budget_mc: 5000, reset, allow: ["fx__echo"] });
      for (let i = 0; i < 3; i++) expect((await t.call(k.secret, "fx__echo", { text: String(i) })).status).toBe(200);
      // Before midnight, 3,000 mc are spent: 2,000 is below them.
      expect(await patch(k.keyId, { budget_mc: 2000 })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "budget_mc" } });

      clock.set(after);
      // No call yet today: the period's spend is 0, so 1,000 is a budget like any other.
      const lowered = await patch(k.keyId, { budget_mc: 1000 });
      expect(lowered.status).toBe(200);
      expect(lowered.body).toMatchObject({ budget_mc: 1000, spent_mc: 0, remaining_mc: 1000, period: newPeriod });
      expect(await t.ledger.keys.get(k.keyId)).toMatchObject({ period: newPeriod, spentMc: 0, budgetMc: 1000 });
      // The old period's spend is kept where refunds and desk check find it.
      expect(t.ledger.testOnlyDatabase().query("SELECT period, spent_mc FROM spend WHERE key_id = ? ORDER BY period").all(k.keyId)).toEqual([
        { period: oldPeriod, spent_mc: 3000 },
      ]);

      expect((await t.call(k.secret, "fx__echo", { text: "today" })).status).toBe(200);
      expect((await t.call(k.secret, "fx__echo", { text: "over" })).status).toBe(402);
      // Now this period has spent 1,000: a budget below that is refused, at it is fine.
      expect(await patch(k.keyId, { budget_mc: 999 })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "budget_mc" } });
      expect((await patch(k.keyId, { budget_mc: 1000 })).status).toBe(200);
      expect(await t.ledger.check.money()).toEqual([]);
    });
  }

  test("a call reserved before midnight and answered after a PATCH that rolled the key over is charged to the old period", async () => {
    clock.set("2026-11-30T23:59:58.000Z");
    const k = await t.makeKey({ budget_mc: 3000, reset: "daily", allow: ["fx__hang"] });
    const hung = t.call(k.secret, "fx__hang", {});
    await fx.whenHanging(1);
    clock.set("2026-12-01T00:00:01.000Z");
    expect((await patch(k.keyId, { budget_mc: 500 })).status).toBe(200);
    fx.release();
    expect((await hung).status).toBe(200);
    // Charged to the period it was reserved in; the new one is untouched.
    expect(await t.ledger.keys.get(k.keyId)).toMatchObject({ period: "2026-12-01", spentMc: 0, budgetMc: 500 });
    expect(t.ledger.testOnlyDatabase().query("SELECT period, spent_mc FROM spend WHERE key_id = ?").all(k.keyId)).toEqual([
      { period: "2026-11-30", spent_mc: 1000 },
    ]);
    expect(await t.ledger.check.money()).toEqual([]);
  });

  test("a clock behind the key's period changes nothing about its spend", async () => {
    clock.set("2026-12-01T10:00:00.000Z");
    const k = await t.makeKey({ budget_mc: 3000, reset: "daily", allow: ["fx__echo"] });
    expect((await t.call(k.secret, "fx__echo", { text: "1" })).status).toBe(200);
    clock.set("2026-11-30T10:00:00.000Z");
    expect(await patch(k.keyId, { budget_mc: 999 })).toEqual({ status: 400, body: { error: "VALUE_INVALID", field: "budget_mc" } });
    expect(await t.ledger.keys.get(k.keyId)).toMatchObject({ period: "2026-12-01", spentMc: 1000 });
  });
});
