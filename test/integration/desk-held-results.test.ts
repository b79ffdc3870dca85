// Results held for agents that disconnected mid-call: only charged calls whose agent was gone
// when the answer was ready, for an hour, at most 20 per key, checked against result_sha256
// before they leave; and the key's receipt listing with its bounds (injected clock, in-process).
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Envelope } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";

const clock = manualClock("2026-11-30T12:00:00.000Z");
let fx: UpstreamFixture;
let t: TestDesk;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 100, upstreamCostMc: 0 }, { now: clock.now });
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

/** A call whose agent has already gone (its request's signal aborted) by the time the answer is ready. */
async function callGone(secret: string, text: string): Promise<string> {
  const gone = new AbortController();
  gone.abort();
  const r = await t.handler(
    new Request("http://desk.test/v1/tools/fx__echo", {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify({ text }),
      signal: gone.signal,
    }),
  );
  return r.headers.get("x-clearing-receipt-id")!;
}

const get = (path: string, secret: string) => t.handler(new Request(`http://desk.test${path}`, { headers: { authorization: `Bearer ${secret}` } }));
type Listing = { receipts: Envelope[]; held_results: string[] };

test("held for an hour, then gone; a refused call holds nothing", async () => {
  const k = await t.makeKey({ budget_mc: 150, reset: "none", allow: ["fx__echo"] });
  const id = await callGone(k.secret, "one");
  expect((await get(`/v1/receipts/${id}/result`, k.secret)).status).toBe(200);
  // The second has no room: refused with a receipt, and nothing to hold.
  const refusedId = await callGone(k.secret, "two");
  expect((await get(`/v1/receipts/${refusedId}/result`, k.secret)).status).toBe(404);
  expect(((await (await get("/v1/receipts", k.secret)).json()) as Listing).held_results).toEqual([id]);
  clock.advance(60 * 60 * 1000 - 1);
  expect((await get(`/v1/receipts/${id}/result`, k.secret)).status).toBe(200);
  clock.advance(1);
  const expired = await get(`/v1/receipts/${id}/result`, k.secret);
  expect([expired.status, await expired.json()]).toEqual([404, { error: "RESULT_UNKNOWN" }]);
  expect(((await (await get("/v1/receipts", k.secret)).json()) as Listing).held_results).toEqual([]);
  clock.set("2026-11-30T12:00:00.000Z");
});

test("at most 20 per key: the oldest goes first", async () => {
  const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["fx__echo"] });
  const ids: string[] = [];
  for (let i = 0; i < 21; i++) ids.push(await callGone(k.secret, `n${i}`));
  expect((await get(`/v1/receipts/${ids[0]}/result`, k.secret)).status).toBe(404);
  for (const id of ids.slice(1)) expect((await get(`/v1/receipts/${id}/result`, k.secret)).status).toBe(200);
  expect(t.ledger.testOnlyDatabase().query("SELECT count(*) AS n FROM held_results WHERE key_id = ?").get(k.keyId)).toEqual({ n: 20 });
});

test("a held result that no longer matches its receipt's result_sha256 is never served", async () => {
  const k = await t.makeKey({ budget_mc: 1000, reset: "none", allow: ["fx__echo"] });
  const id = await callGone(k.secret, "original");
  t.ledger
    .testOnlyDatabase()
    .query("UPDATE held_results SET result = ? WHERE receipt_id = ?")
    .run(JSON.stringify({ content: [{ type: "text", text: "forged" }] }), id);
  const r = await get(`/v1/receipts/${id}/result`, k.secret);
  expect([r.status, await r.json()]).toEqual([500, { error: "INTERNAL" }]);
  expect(t.logs.some((l) => l.includes(`held result of receipt ${id} does not match its result_sha256`))).toBe(true);
});

test("the listing: the key's own receipts in chain order, since and limit checked and bounded", async () => {
  const k = await t.makeKey({ budget_mc: 1000, reset: "none", allow: ["fx__echo"] });
  for (let i = 0; i < 3; i++) {
    expect((await t.call(k.secret, "fx__echo", { text: String(i) })).status).toBe(200);
    clock.advance(1000);
  }
  const all = (await (await get("/v1/receipts", k.secret)).json()) as Listing;
  expect(all.receipts.map((e) => [e.receipt.seq, e.receipt.key_id])).toEqual([1, 2, 3].map((n) => [n, k.keyId]));
  const since = (await (await get("/v1/receipts?since=2026-11-30T12:00:01Z", k.secret)).json()) as Listing;
  expect(since.receipts.map((e) => e.receipt.seq)).toEqual([2, 3]);
  const two = (await (await get("/v1/receipts?limit=2", k.secret)).json()) as Listing;
  expect(two.receipts.map((e) => e.receipt.seq)).toEqual([1, 2]);
  for (const [query, field] of [
    ["since=yesterday", "since"],
    ["limit=0", "limit"],
    ["limit=1001", "limit"],
    ["limit=1.5", "limit"],
  ]) {
    const r = await get(`/v1/receipts?${query}`, k.secret);
    expect([query, r.status, await r.json()]).toEqual([query, 400, { error: "VALUE_INVALID", field }]);
  }
  expect((await get("/v1/receipts", "cd_live_nope")).status).toBe(401);
  clock.set("2026-11-30T12:00:00.000Z");
});
