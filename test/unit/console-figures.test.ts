// The console's figures, without a browser: per-day sums for the chart (charged calls only,
// every day between the first and the last, at most CHART_DAYS) and the amount display.
import { describe, expect, test } from "bun:test";
import type { AuditView } from "../../src/core/desk/wire.ts";
import { hint, mc, parseMc } from "../../src/core/money/millicents.ts";
import { CHART_DAYS, perDay } from "../../src/web/console/chart.ts";

const row = (at: string, outcome: AuditView["outcome"], price: number, cost: number): AuditView => ({
  at,
  org_id: "org_a",
  key_id: "key_a",
  tool: "fx__echo",
  outcome,
  http_status: outcome === "charged" ? 200 : 402,
  price_mc: price,
  upstream_cost_mc: cost,
  margin_mc: outcome === "charged" ? price - cost : 0,
  receipt_id: "rcpt_a",
});

describe("console figures", () => {
  test("per day: charged calls only, UTC days, gaps filled", () => {
    const days = perDay([
      row("2026-11-28T23:59:59.999Z", "charged", 2500, 1000),
      row("2026-11-28T10:00:00.000Z", "refused_budget", 2500, 1000),
      row("2026-11-30T00:00:00.000Z", "charged", 1000, 1500),
      row("2026-11-30T12:00:00.000Z", "charged", 500, 0),
    ]);
    expect(days).toEqual([
      { day: "2026-11-28", spend: 2500, margin: 1500, cost: 1000, calls: 1 },
      { day: "2026-11-29", spend: 0, margin: 0, cost: 0, calls: 0 },
      { day: "2026-11-30", spend: 1500, margin: 0, cost: 1500, calls: 2 },
    ]);
    expect(perDay([row("2026-11-28T00:00:00.000Z", "refunded_timeout", 1, 0)])).toEqual([]);
  });

  test("per day: at most CHART_DAYS, the latest ones", () => {
    const days = perDay([row("2025-01-01T00:00:00.000Z", "charged", 1, 0), row("2026-11-30T00:00:00.000Z", "charged", 1, 0)]);
    expect(days.length).toBe(CHART_DAYS);
    expect(days.at(-1)?.day).toBe("2026-11-30");
  });

  test("amounts: exact mc with a cents or dollars hint", () => {
    expect(mc(1234567)).toBe("1,234,567 mc");
    expect([hint(0), hint(1), hint(2500), hint(99_999), hint(100_000), hint(123_456), hint(-1500)]).toEqual([
      "0¢",
      "0.001¢",
      "2.5¢",
      "99.999¢",
      "$1",
      "$1.23456",
      "-1.5¢",
    ]);
    expect([parseMc("2,500"), parseMc(" 7 500 "), parseMc("-1"), parseMc("1.5"), parseMc(""), parseMc("99999999999999999")]).toEqual([
      2500,
      7500,
      null,
      null,
      null,
      null,
    ]);
  });
});
