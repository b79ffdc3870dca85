// The receipts export streams: a page of the ledger is read only when the client has taken the
// one before, so a slow or stalled reader holds one page, never the whole ledger.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { EXPORT_PAGE } from "../../src/core/desk/receipts.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture } from "./desk-harness.ts";

let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(() => fx.stop());

test("the export is read a page per pull, and a reader that stops holds the rest unread", { timeout: 60_000 }, async () => {
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
  records.receiptPages = async function* (filter, pageSize) {
    for await (const page of original(filter, pageSize)) {
      pagesRead++;
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
  } finally {
    records.receiptPages = original;
  }
});
