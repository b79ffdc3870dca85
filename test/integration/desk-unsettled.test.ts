// A settlement the ledger left unknown (a database that went away during the COMMIT): the agent
// is answered 503 LEDGER_UNAVAILABLE without the result, and once the ledger answers the desk
// settles the call again. When the charge had committed it stands, and the result is held for
// the agent to fetch (it paid for it); when it had not, the call is refunded. Faults are planted
// around the real ledger's settle (in-process, SQLite).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { LedgerUnavailable, type MoneyLedger } from "../../src/core/desk/ports.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, type TestDesk } from "./desk-harness.ts";

let fx: UpstreamFixture;
let t: TestDesk;
let fault: "none" | "after_commit" | "before_commit" = "none";
let resolveFault: "none" | "down" = "none";

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 100, upstreamCostMc: 0 });
  const money = t.ledger.money as MoneyLedger;
  const settle = money.settle.bind(money);
  money.settle = async (s, make) => {
    if (s.outcome === "refunded_abandoned" && resolveFault === "down") throw new LedgerUnavailable("still down");
    const planted = fault;
    fault = "none";
    if (planted === "before_commit") throw new LedgerUnavailable("connection closed before COMMIT");
    const settled = await settle(s, make);
    if (planted === "after_commit") throw new LedgerUnavailable("COMMIT sent, answer lost");
    return settled;
  };
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

const get = (path: string, secret: string) => t.handler(new Request(`http://desk.test${path}`, { headers: { authorization: `Bearer ${secret}` } }));
const outcomes = async (secret: string) =>
  ((await (await get("/v1/receipts", secret)).json()) as { receipts: { receipt: { id: string; outcome: string } }[] }).receipts.map((e) => e.receipt);

test("the charge had committed: 503 without the result, then the charge stands and the result is held for the agent", async () => {
  const k = await t.makeKey({ budget_mc: 1_000, reset: "none", allow: ["fx__echo"] });
  fault = "after_commit";
  const r = await t.call(k.secret, "fx__echo", { text: "paid for" });
  expect([r.status, await r.json()]).toEqual([503, { error: "LEDGER_UNAVAILABLE" }]);
  expect(await t.desk.resolveUnsettled()).toBe(1);
  const [charged, ...rest] = await outcomes(k.secret);
  expect([charged!.outcome, rest]).toEqual(["charged", []]);
  const held = await get(`/v1/receipts/${charged!.id}/result`, k.secret);
  expect(held.status).toBe(200);
  expect(JSON.stringify(await held.json())).toContain("paid for");
  expect(t.logs.some((l) => l.includes(`receipt ${charged!.id}: charged, but its answer was lost with the ledger`))).toBe(true);
  expect(await t.desk.resolveUnsettled()).toBe(0);
});

test("the charge had not committed: 503, then the call is refunded, once; while the ledger is still down it waits", async () => {
  const k = await t.makeKey({ budget_mc: 1_000, reset: "none", allow: ["fx__echo"] });
  fault = "before_commit";
  const r = await t.call(k.secret, "fx__echo", { text: "lost" });
  expect(r.status).toBe(503);
  resolveFault = "down";
  expect(await t.desk.resolveUnsettled()).toBe(0);
  resolveFault = "none";
  expect(await t.desk.resolveUnsettled()).toBe(1);
  expect((await outcomes(k.secret)).map((x) => x.outcome)).toEqual(["refunded_abandoned"]);
  const key = (await (await get("/v1/key", k.secret)).json()) as { spent_mc: number };
  expect(key.spent_mc).toBe(0);
  expect(await t.desk.resolveUnsettled()).toBe(0);
});
