// An organization's signed statement (SPEC 8.18), made by the desk over real calls, top-ups and a
// budget change, and checked by the compiled `verify-receipt` from the receipts export alone:
// every figure recomputed; a receipt left out of the export, a figure the desk signed wrongly,
// and a tampered payload each fail, naming what differs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Statement, type StatementEnvelope, signStatement } from "../../src/core/finance/statement.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { runBinary } from "../helpers/binary.ts";
import { tempDir } from "../helpers/tmp.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "../integration/desk-harness.ts";

const clock = manualClock("2026-10-30T09:00:00.000Z");
let fx: UpstreamFixture;
let t: TestDesk;
let orgId: string;
const tmp = tempDir("statement-");

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo", "fx__add", "fx__fail_5xx"], priceMc: 1000, upstreamCostMc: 300 }, { now: clock.now });
  const k = await t.makeKey({ budget_mc: 100_000, reset: "monthly", allow: ["fx__echo", "fx__add", "fx__fail_5xx"] });
  orgId = k.orgId;
  // October: one charge, before the org has a budget (its first budget counts it).
  clock.set("2026-10-30T10:00:00.000Z");
  expect((await t.call(k.secret, "fx__echo", { text: "october" })).status).toBe(200);
  clock.set("2026-11-01T08:00:00.000Z");
  expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 5_000, reset: "none" })).status).toBe(200);
  clock.advance(60_000);
  expect((await t.admin("POST", `/admin/orgs/${orgId}/topups`, { amount_mc: 3_000, reference: "inv-11" })).status).toBe(201);
  for (const [tool, args] of [
    ["fx__echo", { text: "a" }],
    ["fx__add", { a: 1, b: 2 }],
    ["fx__fail_5xx", {}],
    ["fx__echo", { text: "b" }],
  ] as const) {
    clock.advance(60_000);
    await t.call(k.secret, tool, args);
  }
  clock.advance(60_000);
  expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 10_000 })).status).toBe(200);
  clock.set("2026-12-02T00:00:00.000Z");
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
  tmp[Symbol.dispose]();
});

const file = (name: string, text: string) => {
  const path = join(tmp.path, name);
  writeFileSync(path, text);
  return path;
};

async function fixtures() {
  const keys = file("jwks.json", JSON.stringify(await t.desk.jwks()));
  const exportText = await (await t.admin("GET", `/admin/receipts?org_id=${orgId}`)).text();
  return { keys, exportText, exportPath: file("export.jsonl", exportText) };
}

async function statementOf(period: string): Promise<StatementEnvelope> {
  const r = await t.admin("GET", `/admin/statements?org_id=${orgId}&period=${period}`);
  expect(r.status).toBe(200);
  expect(r.headers.get("content-disposition")).toBe(`attachment; filename="statement-${orgId}-${period}.json"`);
  return (await r.json()) as StatementEnvelope;
}

const verify = (statementPath: string, keys: string, exportPath: string) =>
  runBinary(["verify-receipt", statementPath, "--keys", keys, "--receipts", exportPath]);

describe("statements", () => {
  test("November, closed: every figure, and verify-receipt recomputes them all from the export", async () => {
    const env = await statementOf("2026-11");
    const s = env.statement;
    expect(s).toMatchObject({
      org_id: orgId,
      period: "2026-11",
      closed: true,
      covers_until: "2026-12-01T00:00:00.000Z",
      reset: "none",
      opening_budget_mc: null,
      closing_budget_mc: 10_000,
      opening_balance_mc: null,
      // 10,000 − the October charge − November's three.
      closing_balance_mc: 6_000,
      topups: { count: 1, amount_mc: 3_000 },
      budget_changes: { count: 2, raised_mc: 2_000, lowered_mc: 0 },
      charges: { calls: 3, amount_mc: 3_000, upstream_cost_mc: 900, margin_mc: 2_100 },
      refunds: { calls: 1, price_mc: 1_000 },
      refusals: { calls: 0 },
      receipts: { count: 4 },
    });
    expect(s.tools.map((l) => [l.tool, l.calls, l.charged_mc, l.margin_mc, l.refunded_calls])).toEqual([
      ["fx__add", 1, 1_000, 700, 0],
      ["fx__echo", 2, 2_000, 1_400, 0],
      ["fx__fail_5xx", 1, 0, 0, 1],
    ]);
    expect(s.records.map((r) => r.record.type)).toEqual(["budget_set", "topup", "budget_set"]);
    const { keys, exportPath } = await fixtures();
    const ok = await verify(file("statement.json", JSON.stringify(env)), keys, exportPath);
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain("ok   figures (every figure matches the receipts (2026-11, closed))");
  });

  test("an open period says so and still verifies", async () => {
    const env = await statementOf("2026-12");
    expect(env.statement).toMatchObject({ closed: false, covers_until: "2026-12-02T00:00:00.000Z", closing_balance_mc: 6_000 });
    const { keys, exportPath } = await fixtures();
    const r = await verify(file("open.json", JSON.stringify(env)), keys, exportPath);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("OPEN: the period had not ended");
  });

  test("a receipt removed from the export, a figure signed wrongly, a tampered payload: each fails", async () => {
    const env = await statementOf("2026-11");
    const { keys, exportText, exportPath } = await fixtures();
    const statementPath = file("good.json", JSON.stringify(env));

    const lines = exportText.trim().split("\n");
    const fewer = file("fewer.jsonl", `${lines.filter((_, i) => i !== 2).join("\n")}\n`);
    const missing = await verify(statementPath, keys, fewer);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/FAILED chains: .*\n.*missing from the export/);
    expect(missing.stdout).toContain("FAILED figures");

    // A desk that signs a figure the receipts do not give is caught by the recomputation.
    const { v: _v, type: _type, kid: _kid, ...fields } = env.statement as Statement;
    const lie = signStatement(t.desk.signer, { ...fields, charges: { ...fields.charges, amount_mc: 2_000, margin_mc: 1_100 } });
    const wrong = await verify(file("lie.json", JSON.stringify(lie)), keys, exportPath);
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toContain("charges.amount_mc: the statement says 2000, the receipts give 3000");

    const tampered = JSON.parse(JSON.stringify(env)) as StatementEnvelope;
    tampered.statement.closing_balance_mc = 9_999;
    const edited = await verify(file("tampered.json", JSON.stringify(tampered)), keys, exportPath);
    expect(edited.code).toBe(1);
    expect(edited.stdout).toContain("FAILED signature");
  });

  test("bad requests: no org, unknown org, a malformed period, a period not begun", async () => {
    expect((await t.admin("GET", "/admin/statements?period=2026-11")).status).toBe(400);
    expect(await (await t.admin("GET", "/admin/statements?org_id=org_nope&period=2026-11")).json()).toEqual({ error: "ORG_UNKNOWN" });
    expect(await (await t.admin("GET", `/admin/statements?org_id=${orgId}&period=2026-13`)).json()).toEqual({ error: "VALUE_INVALID", field: "period" });
    expect(await (await t.admin("GET", `/admin/statements?org_id=${orgId}&period=2027-01`)).json()).toEqual({ error: "VALUE_INVALID", field: "period" });
  });
});
