// The receipts export streams: a page of the ledger is read only when the client has taken the
// one before, so a slow or stalled reader holds one page, never the whole ledger; and each page
// on a turn of the event loop of its own, so a fast reader never holds the desk's other requests.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { EXPORT_PAGE } from "../../src/core/desk/receipts.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture } from "./desk-harness.ts";

let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(() => fx.stop());

test("the export is read a page per pull, each on its own turn of the event loop, and a reader that stops holds the rest unread", {
  timeout: 60_000,
}, async () => {
  await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1, upstreamCostMc: 0 });
  const total = 2 * EXPORT_PAGE + 5;
  const keys = await Promise.all(Array.from({ length: 10 }, () => t.makeKey({ budget_mc: 1_000_000, reset: "none", allow: ["fx__echo"] })));
  let sent = 0;
  await Promise.all(
    keys.map(async (k) => {
      while (sent < total) {
        sent++;
        expect((await t.call(k.secret, "fx__echo", { text: "x" })).status).toBe(200);
      }
    }),
  );
  const records = t.ledger.records;
  const original = records.receiptPages.bind(records);
  let pagesRead = 0;
  // Turns of the event loop, counted by a callback that queues itself for the next one.
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  tick();
  const pageTurns: number[] = [];
  records.receiptPages = async function* (filter, pageSize) {
    for await (const page of original(filter, pageSize)) {
      pagesRead++;
      pageTurns.push(turn);
      yield page;
    }
  };
  try {
    const answer = await t.admin("GET", "/admin/receipts");
    expect(answer.status).toBe(200);
    const reader = answer.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    await Bun.sleep(0);
    // the first page, and at most the one the stream asks for ahead of the reader
    expect(pagesRead).toBeLessThanOrEqual(2);
    let lines = new TextDecoder().decode(first.value).split("\n").length - 1;
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      lines += new TextDecoder().decode(next.value).split("\n").length - 1;
    }
    expect(lines).toBe(sent);
    expect(pagesRead).toBe(3);
    // A reader that takes each chunk at once: its pulls chain in microtasks unless each waits
    // for the next turn, and the calls that came meanwhile would wait for the whole export.
    expect(new Set(pageTurns).size).toBe(pageTurns.length);
  } finally {
    ticking = false;
    records.receiptPages = original;
  }
});
