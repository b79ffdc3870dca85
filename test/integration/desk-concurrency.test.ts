// Concurrent clearings through the fetch handler against a real upstream: the budget is never
// passed, whatever the interleaving, including across a daily or monthly UTC reset.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
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

/** Statuses counted; 402 and 429 (the key's 20-failures-an-hour limit) both mean refused. */
function refusedOr(statuses: number[]) {
  const c = count(statuses);
  return { 200: c[200] ?? 0, refused: (c[402] ?? 0) + (c[429] ?? 0), other: statuses.length - (c[200] ?? 0) - (c[402] ?? 0) - (c[429] ?? 0) };
}

function count(statuses: number[]) {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
}

describe("concurrent clearings", () => {
  test("20 concurrent calls on a key with room for one: exactly one success", async () => {
    const k = await t.makeKey({ budget_mc: 1999, reset: "none", allow: ["fx__echo"] });
    const before = fx.calls.get("echo") ?? 0;
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => t.call(k.secret, "fx__echo", { text: String(i) })));
    expect(count(rs.map((r) => r.status))).toEqual({ 200: 1, 402: 19 });
    expect(fx.calls.get("echo")).toBe(before + 1);
    expect((await t.ledger.keys.get(k.keyId))!.spentMc).toBe(1000);
    expect(await t.ledger.check.money()).toEqual([]);
  });

  test("10,000 calls, 200 at a time, on a budget for exactly 137: exactly 137 charged", async () => {
    const k = await t.makeKey({ budget_mc: 137_000 + 999, reset: "none", allow: ["fx__echo"] });
    const before = fx.calls.get("echo") ?? 0;
    const statuses: number[] = [];
    let next = 0;
    const worker = async () => {
      while (next < 10_000) {
        next++;
        const r = await t.call(k.secret, "fx__echo", { text: "load" });
        statuses.push(r.status);
        await r.arrayBuffer();
      }
    };
    await Promise.all(Array.from({ length: 200 }, worker));
    expect(refusedOr(statuses)).toEqual({ 200: 137, refused: 9863, other: 0 });
    expect(fx.calls.get("echo")).toBe(before + 137);
    expect((await t.ledger.keys.get(k.keyId))!.spentMc).toBe(137_000);
    const charged = t.ledger
      .testOnlyDatabase()
      .query("SELECT count(*) AS n, sum(amount_mc) AS mc FROM receipts WHERE key_id = ? AND outcome = 'charged'")
      .get(k.keyId);
    expect(charged).toEqual({ n: 137, mc: 137_000 });
    expect(await t.ledger.check.money()).toEqual([]);
  }, 60_000);

  for (const [reset, before, after] of [
    ["daily", "2026-11-30T23:59:59.000Z", "2026-12-01T00:00:00.000Z"],
    ["monthly", "2026-11-30T23:59:59.000Z", "2026-12-01T00:00:00.000Z"],
  ] as const) {
    test(`${reset} reset under concurrency: each period grants its budget exactly once`, async () => {
      clock.set(before);
      const k = await t.makeKey({ budget_mc: 3000, reset, allow: ["fx__echo"] });
      const burst = () => Promise.all(Array.from({ length: 30 }, (_, i) => t.call(k.secret, "fx__echo", { text: String(i) })));
      expect(refusedOr((await burst()).map((r) => r.status))).toEqual({ 200: 3, refused: 27, other: 0 });
      clock.set(after);
      expect(refusedOr((await burst()).map((r) => r.status))).toEqual({ 200: 3, refused: 27, other: 0 });
      const perPeriod = t.ledger.testOnlyDatabase().query("SELECT period, spent_mc FROM spend WHERE key_id = ? ORDER BY period").all(k.keyId);
      expect(perPeriod).toEqual(
        reset === "daily"
          ? [
              { period: "2026-11-30", spent_mc: 3000 },
              { period: "2026-12-01", spent_mc: 3000 },
            ]
          : [
              { period: "2026-11", spent_mc: 3000 },
              { period: "2026-12", spent_mc: 3000 },
            ],
      );
      expect(await t.ledger.check.money()).toEqual([]);
      clock.set("2026-11-30T12:00:00.000Z");
    });

    test(`${reset} reset while calls are in flight: no period ever passes its budget`, async () => {
      clock.set(before);
      const k = await t.makeKey({ budget_mc: 3000, reset, allow: ["fx__echo"] });
      const early = Array.from({ length: 30 }, (_, i) => t.call(k.secret, "fx__echo", { text: String(i) }));
      clock.set(after);
      const late = Array.from({ length: 30 }, (_, i) => t.call(k.secret, "fx__echo", { text: String(i) }));
      const statuses = (await Promise.all([...early, ...late])).map((r) => r.status);
      const perPeriod = t.ledger.testOnlyDatabase().query("SELECT period, spent_mc FROM spend WHERE key_id = ? ORDER BY period").all(k.keyId) as {
        spent_mc: number;
      }[];
      for (const p of perPeriod) expect(p.spent_mc).toBeLessThanOrEqual(3000);
      expect(perPeriod.at(-1)!.spent_mc).toBe(3000);
      expect(count(statuses)[200]).toBe(perPeriod.reduce((n, p) => n + p.spent_mc, 0) / 1000);
      expect(await t.ledger.check.money()).toEqual([]);
      clock.set("2026-11-30T12:00:00.000Z");
    });
  }
});
