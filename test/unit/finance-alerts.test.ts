// Budget alert thresholds and the alert event. The crossings are pure; the property test drives
// them the way the desk will: over the period's settled charges, under any interleaving of
// reservations, charges and refunds.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  ALERT_DATA_FIELDS,
  alertBody,
  alertEvent,
  alertEventProblem,
  crossedByCharge,
  DEFAULT_THRESHOLDS,
  reachedByRefusal,
  thresholdMc,
  thresholdsProblem,
} from "../../src/core/finance/alerts.ts";
import { canonicalJson } from "../../src/core/receipt/canonical.ts";

describe("threshold marks and crossings", () => {
  test("a mark is ceil(budget × pct / 100), exact past 2^53", () => {
    expect(thresholdMc(100_000, 80)).toBe(80_000);
    expect(thresholdMc(1_001, 80)).toBe(801);
    expect(thresholdMc(1, 1)).toBe(1);
    expect(thresholdMc(0, 100)).toBe(0);
    const max = Number.MAX_SAFE_INTEGER;
    expect(thresholdMc(max, 100)).toBe(max);
    // 2^53 - 1 = 9007199254740991; 80 % is 7205759403792792.8, so the mark is ...793. A float
    // computation gives a neighbour instead.
    expect(thresholdMc(max, 80)).toBe(7_205_759_403_792_793);
    expect(Math.ceil((max * 80) / 100)).not.toBe(7_205_759_403_792_793);
  });

  test("a charge crosses the marks in (before, after]; landing on a mark crosses it", () => {
    expect(crossedByCharge(100_000, 79_000, 80_500, DEFAULT_THRESHOLDS)).toEqual([{ threshold_pct: 80, threshold_mc: 80_000 }]);
    expect(crossedByCharge(100_000, 79_000, 80_000, DEFAULT_THRESHOLDS)).toEqual([{ threshold_pct: 80, threshold_mc: 80_000 }]);
    expect(crossedByCharge(100_000, 80_000, 81_000, DEFAULT_THRESHOLDS)).toEqual([]);
    expect(crossedByCharge(100_000, 70_000, 100_000, [100, 80, 90])).toEqual([
      { threshold_pct: 80, threshold_mc: 80_000 },
      { threshold_pct: 90, threshold_mc: 90_000 },
      { threshold_pct: 100, threshold_mc: 100_000 },
    ]);
    expect(crossedByCharge(null, 0, 1_000_000, DEFAULT_THRESHOLDS)).toEqual([]);
    expect(crossedByCharge(0, 0, 0, DEFAULT_THRESHOLDS)).toEqual([]);
    expect(crossedByCharge(100_000, 90_000, 90_000, DEFAULT_THRESHOLDS)).toEqual([]);
    expect(crossedByCharge(100_000, 0, 100_000, [])).toEqual([]);
  });

  test("a refusal for want of budget reaches every mark up to the budget", () => {
    expect(reachedByRefusal(100_000, 99_000, DEFAULT_THRESHOLDS)).toEqual([{ threshold_pct: 100, threshold_mc: 100_000 }]);
    expect(reachedByRefusal(100_000, 50_000, DEFAULT_THRESHOLDS)).toEqual([
      { threshold_pct: 80, threshold_mc: 80_000 },
      { threshold_pct: 100, threshold_mc: 100_000 },
    ]);
    expect(reachedByRefusal(100_000, 100_000, DEFAULT_THRESHOLDS)).toEqual([]);
    expect(reachedByRefusal(null, 5, DEFAULT_THRESHOLDS)).toEqual([]);
  });

  test("threshold lists: 0-10 distinct integer percentages 1-100", () => {
    for (const ok of [[], [80, 100], [1], [100], [5, 10, 20, 30, 40, 50, 60, 70, 80, 90]]) expect(thresholdsProblem(ok)).toBeNull();
    for (const bad of [null, 80, [0], [101], [80, 80], [80.5], ["80"], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]]) expect(thresholdsProblem(bad)).not.toBeNull();
  });

  test("property: over settled charges, under any interleaving of reserve, charge and refund, each mark is crossed once exactly when reached", () => {
    type Op = { kind: "reserve"; price: number } | { kind: "settle"; pick: number; charge: boolean };
    const op = fc.oneof(
      fc.record({ kind: fc.constant("reserve" as const), price: fc.integer({ min: 0, max: 400 }) }),
      fc.record({ kind: fc.constant("settle" as const), pick: fc.nat(), charge: fc.boolean() }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 3000 }),
        fc.uniqueArray(fc.integer({ min: 1, max: 100 }), { maxLength: 10 }),
        fc.array(op, { maxLength: 120 }),
        (budget, thresholds, ops: Op[]) => {
          let reserved = 0; // the ledger's spent_mc: charges plus reservations in flight
          let charged = 0; // settled charges of the period
          const open: number[] = [];
          const fired = new Map<number, number>();
          const settle = (i: number, charge: boolean) => {
            const [price] = open.splice(i, 1) as [number];
            if (!charge) {
              reserved -= price;
              return;
            }
            for (const c of crossedByCharge(budget, charged, charged + price, thresholds)) fired.set(c.threshold_pct, (fired.get(c.threshold_pct) ?? 0) + 1);
            charged += price;
          };
          for (const o of ops) {
            if (o.kind === "reserve" && reserved + o.price <= budget) {
              reserved += o.price;
              open.push(o.price);
            } else if (o.kind === "settle" && open.length > 0) settle(o.pick % open.length, o.charge);
          }
          while (open.length > 0) settle(0, true);
          for (const pct of thresholds) {
            const reached = budget > 0 && charged >= thresholdMc(budget, pct);
            if ((fired.get(pct) ?? 0) !== (reached ? 1 : 0)) return false;
          }
          return charged <= budget;
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe("the alert event (version 1)", () => {
  const facts = {
    alert_id: "alrt_0123456789abcdef",
    scope: "key" as const,
    org_id: "org_0123456789abcdef",
    key_id: "key_0123456789abcdef",
    period: "2026-11",
    budget_mc: 100_000,
    spent_mc: 80_500,
    cause: "charge" as const,
    tool: "everything__echo",
    receipt_id: "rcpt_0123456789abcdef",
    at: "2026-11-30T09:15:02.417Z",
    crossing: { threshold_pct: 80, threshold_mc: 80_000 },
  };

  test("the Standard Webhooks payload shape: type, timestamp, data with every field", () => {
    const event = alertEvent(facts);
    expect(event).toEqual({
      type: "budget.threshold_crossed",
      timestamp: "2026-11-30T09:15:02.417Z",
      data: {
        v: 1,
        alert_id: "alrt_0123456789abcdef",
        scope: "key",
        org_id: "org_0123456789abcdef",
        key_id: "key_0123456789abcdef",
        period: "2026-11",
        threshold_pct: 80,
        threshold_mc: 80_000,
        budget_mc: 100_000,
        spent_mc: 80_500,
        remaining_mc: 19_500,
        cause: "charge",
        tool: "everything__echo",
        receipt_id: "rcpt_0123456789abcdef",
      },
    });
    expect(Object.keys(event.data)).toEqual([...ALERT_DATA_FIELDS]);
    expect(alertEventProblem(event)).toBeNull();
  });

  test("the body is canonical JSON, the same bytes for the same event", () => {
    const body = alertBody(alertEvent(facts));
    expect(body).toBe(canonicalJson(JSON.parse(body)));
    expect(body.startsWith('{"data":{"alert_id":"alrt_')).toBe(true);
    expect(body.length).toBeLessThan(600);
  });

  test("the strict reader refuses an unknown or missing field, a wrong version, and figures that do not add up", () => {
    const event = alertEvent(facts);
    const mutate = (f: (d: Record<string, unknown>, e: Record<string, unknown>) => void) => {
      const copy = structuredClone(event) as unknown as Record<string, unknown>;
      f(copy.data as Record<string, unknown>, copy);
      return alertEventProblem(copy);
    };
    expect(mutate((d) => (d.secret = "x"))).toBe("data.secret: unknown field");
    expect(mutate((d) => delete d.receipt_id)).toBe("data.receipt_id: missing");
    expect(mutate((d) => (d.v = 2))).toBe("data.v is not 1");
    expect(mutate((d) => (d.threshold_mc = 79_999))).toContain("threshold_mc");
    expect(mutate((d) => (d.remaining_mc = 0))).toContain("remaining_mc");
    expect(mutate((d) => (d.scope = "team"))).toContain("scope");
    expect(mutate((_d, e) => (e.extra = 1))).toContain("exactly type, timestamp and data");
    expect(mutate((_d, e) => (e.type = "budget.exhausted"))).toContain("type");
    expect(mutate((d) => (d.period = "2026-13"))).toContain("period");
  });
});
