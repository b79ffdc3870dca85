// The receipts export streams: a chunk of the ledger is read only when the client has taken the
// one before (one read ahead), so a slow or stalled reader holds two chunks, never the whole
// ledger; on SQLite the chunks are read and encoded on a thread of their own, which ends with the
// export however it ends; and each chunk reaches the stream on a turn of the event loop of its
// own, so a fast reader never holds the desk's other requests.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { renameSync } from "node:fs";
import { join } from "node:path";
import { MAX_EXPORT_THREADS } from "../../src/adapters/sqlite/desk/export-thread.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { chunksOfPages, EXPORT_PAGE } from "../../src/core/desk/receipts.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { tempDir } from "../helpers/tmp.ts";
import { ADMIN_TOKEN, makeDeskOnFixture } from "./desk-harness.ts";

let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(() => fx.stop());

/** Turns of the event loop, counted by a callback that queues itself for the next one. */
function turns(): { now: () => number; stop: () => void } {
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  tick();
  return { now: () => turn, stop: () => (ticking = false) };
}

const linesIn = (bytes: Uint8Array) => bytes.reduce((n, b) => n + (b === 10 ? 1 : 0), 0);

test("the export is read a chunk per pull on its own thread, each on its own turn of the event loop, and a reader that stops holds the rest unread", {
  timeout: 60_000,
}, async () => {
  await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1, upstreamCostMc: 0 });
  // ~1.2 KB an envelope: 180 receipts fill three chunks and part of a fourth
  const total = 180;
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
  const threads = t.ledger.testOnlyExportThreads()!;
  const records = t.ledger.records;
  const original = records.exportChunks.bind(records);
  const loop = turns();
  const chunkTurns: number[] = [];
  records.exportChunks = async function* (filter) {
    for await (const chunk of original(filter)) {
      chunkTurns.push(loop.now());
      yield chunk;
    }
  };
  try {
    const asked = threads.testOnlyChunksAsked;
    const answers = threads.testOnlyAnswers;
    const answer = await t.admin("GET", "/admin/receipts");
    expect(answer.status).toBe(200);
    const reader = answer.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    // A stopped reader: the thread was asked for the chunk it got and the one read ahead, no more.
    // Once the one ahead is in, a stream that read further would have asked again in a few
    // milliseconds (one message each way): 200 ms show that nothing more is read.
    while (threads.testOnlyAnswers - answers < 2) await Bun.sleep(1);
    await Bun.sleep(200);
    expect(threads.testOnlyChunksAsked - asked).toBe(2);
    expect(threads.testOnlyRunning()).toBe(1);
    let lines = linesIn(first.value!);
    let chunks = 1;
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      chunks++;
      lines += linesIn(next.value);
    }
    expect(lines).toBe(sent);
    expect(chunks).toBeGreaterThanOrEqual(3);
    // asked for each chunk and for the end of the export, which ends its thread
    expect(threads.testOnlyChunksAsked - asked).toBe(chunks + 1);
    expect(threads.testOnlyRunning()).toBe(0);
    expect(new Set(chunkTurns).size).toBe(chunkTurns.length);

    // A reader that gives up part-way ends the thread; so does the ledger closing under one.
    const cancelled = (await t.admin("GET", "/admin/receipts")).body!.getReader();
    expect((await cancelled.read()).done).toBe(false);
    expect(threads.testOnlyRunning()).toBe(1);
    await cancelled.cancel();
    expect(threads.testOnlyRunning()).toBe(0);

    // A ledger that reads on the desk's thread (PostgreSQL, SQLite in memory): a reader that takes
    // each chunk at once chains its pulls in microtasks unless each waits for the next turn, and
    // the calls that came meanwhile would wait for the whole export.
    chunkTurns.length = 0;
    records.exportChunks = async function* (filter) {
      for await (const chunk of chunksOfPages(records.receiptPages(filter, EXPORT_PAGE))) {
        chunkTurns.push(loop.now());
        yield chunk;
      }
    };
    expect(linesIn(new Uint8Array(await (await t.admin("GET", "/admin/receipts")).arrayBuffer()))).toBe(sent);
    expect(chunkTurns.length).toBe(Math.ceil(sent / EXPORT_PAGE));
    expect(new Set(chunkTurns).size).toBe(chunkTurns.length);
  } finally {
    loop.stop();
    records.exportChunks = original;
  }
});

test("the export thread refuses a file put in the ledger's place since the desk opened it", async () => {
  await using dir = tempDir("export-swap-");
  const path = join(dir.path, "desk.db");
  const ledger = new SqliteDeskLedger(path);
  try {
    const other = new SqliteDeskLedger(join(dir.path, "other.db"));
    await other.close();
    renameSync(path, join(dir.path, "moved.db"));
    renameSync(join(dir.path, "other.db"), path);
    const read = async () => {
      for await (const _ of ledger.records.exportChunks({ orgId: null, sinceMs: null })) break;
    };
    await expect(read()).rejects.toThrow(/^the receipts export thread failed: .*desk\.db was replaced while it was being opened$/);
    expect(ledger.testOnlyExportThreads()!.testOnlyRunning()).toBe(0);
  } finally {
    await ledger.close();
  }
});

test("at most MAX_EXPORT_THREADS exports read at once: a further one waits for a place, then exports the same lines", { timeout: 60_000 }, async () => {
  await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1, upstreamCostMc: 0 });
  const key = await t.makeKey({ budget_mc: 1_000_000, reset: "none", allow: ["fx__echo"] });
  for (let i = 0; i < 5; i++) expect((await t.call(key.secret, "fx__echo", { text: `call ${i}` })).status).toBe(200);
  const threads = t.ledger.testOnlyExportThreads()!;
  const all = () => t.ledger.records.exportChunks({ orgId: null, sinceMs: null })[Symbol.asyncIterator]();
  const readers = Array.from({ length: MAX_EXPORT_THREADS }, all);
  for (const r of readers) expect((await r.next()).done).toBe(false);
  expect(threads.testOnlyRunning()).toBe(MAX_EXPORT_THREADS);

  const waiting = all();
  let firstOfWaiting: IteratorResult<Uint8Array> | null = null;
  const pulled = waiting.next().then((r) => (firstOfWaiting = r));
  await Bun.sleep(200);
  expect(firstOfWaiting).toBeNull();
  expect(threads.testOnlyQueued()).toBe(1);
  expect(threads.testOnlyRunning()).toBe(MAX_EXPORT_THREADS);

  // one reader gives up: its place goes to the export waiting
  await readers[0]!.return!(undefined);
  await pulled;
  expect(threads.testOnlyQueued()).toBe(0);
  expect(threads.testOnlyRunning()).toBe(MAX_EXPORT_THREADS);
  let lines = linesIn(firstOfWaiting!.value!);
  for (let next = await waiting.next(); !next.done; next = await waiting.next()) lines += linesIn(next.value);
  expect(lines).toBe(5);

  // the ledger closing fails an export still waiting for a place
  const filler = all();
  expect((await filler.next()).done).toBe(false);
  expect(threads.testOnlyRunning()).toBe(MAX_EXPORT_THREADS);
  const third = all();
  const refused = third.next();
  refused.catch(() => {});
  expect(threads.testOnlyQueued()).toBe(1);
  threads.close();
  await expect(refused).rejects.toThrow("the ledger was closed during the receipts export");
  expect(threads.testOnlyRunning()).toBe(0);
  // and no export starts a thread on the closed ledger
  await expect(all().next()).rejects.toThrow("the ledger was closed during the receipts export");
  expect(threads.testOnlyRunning()).toBe(0);
});

test("a further export waits for a place no longer than the wait (503 EXPORTS_BUSY), and one whose client went away leaves the queue at once", {
  timeout: 60_000,
}, async () => {
  await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1, upstreamCostMc: 0 }, { exportPlaceWaitMs: 300 });
  const key = await t.makeKey({ budget_mc: 1_000_000, reset: "none", allow: ["fx__echo"] });
  for (let i = 0; i < 5; i++) expect((await t.call(key.secret, "fx__echo", { text: `call ${i}` })).status).toBe(200);
  const threads = t.ledger.testOnlyExportThreads()!;
  const all = (signal?: AbortSignal) => t.ledger.records.exportChunks({ orgId: null, sinceMs: null }, signal)[Symbol.asyncIterator]();
  const readers = Array.from({ length: MAX_EXPORT_THREADS }, () => all());
  for (const r of readers) expect((await r.next()).done).toBe(false);

  // Over HTTP: the status comes after the wait, with the code, not a 200 cut off later.
  const started = performance.now();
  const busy = await t.admin("GET", "/admin/receipts");
  expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  expect(busy.status).toBe(503);
  expect(await busy.json()).toEqual({ error: "EXPORTS_BUSY" });
  expect(threads.testOnlyQueued()).toBe(0);
  expect(threads.testOnlyRunning()).toBe(MAX_EXPORT_THREADS);

  // A client that goes away while it waits: out of the queue at once, before the wait is over.
  const gone = new AbortController();
  const request = t.handler(new Request("http://desk.test/admin/receipts", { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: gone.signal }));
  await Bun.sleep(50);
  expect(threads.testOnlyQueued()).toBe(1);
  gone.abort();
  await Bun.sleep(0);
  expect(threads.testOnlyQueued()).toBe(0);
  await request;
  expect(t.logs.filter((l) => l.startsWith("internal"))).toEqual([]);

  // The places it never took are still there: one reader ends, a new export starts at once.
  await readers[0]!.return!(undefined);
  const next = await t.admin("GET", "/admin/receipts");
  expect(next.status).toBe(200);
  expect(linesIn(new Uint8Array(await next.arrayBuffer()))).toBe(5);
  await readers[1]!.return!(undefined);
  expect(threads.testOnlyRunning()).toBe(0);
});

test("a reader that takes no chunk for the idle limit ends its export, and its place is free again", { timeout: 60_000 }, async () => {
  await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1, upstreamCostMc: 0 }, { exportIdleMs: 300 });
  const key = await t.makeKey({ budget_mc: 1_000_000, reset: "none", allow: ["fx__echo"] });
  for (let i = 0; i < 5; i++) expect((await t.call(key.secret, "fx__echo", { text: `call ${i}` })).status).toBe(200);
  const threads = t.ledger.testOnlyExportThreads()!;
  const stalled = (await t.admin("GET", "/admin/receipts")).body!.getReader();
  expect((await stalled.read()).done).toBe(false);
  expect(threads.testOnlyRunning()).toBe(1);
  await Bun.sleep(150);
  // Still within the limit: the export is there.
  expect(threads.testOnlyRunning()).toBe(1);
  await Bun.sleep(400);
  expect(threads.testOnlyRunning()).toBe(0);
  await expect(stalled.read()).rejects.toThrow("took nothing for too long");

  // A reader that keeps reading is not cut, however long the export: each chunk restarts the limit.
  const steady = (await t.admin("GET", "/admin/receipts")).body!.getReader();
  let lines = 0;
  for (let r = await steady.read(); !r.done; r = await steady.read()) {
    lines += linesIn(r.value);
    await Bun.sleep(200);
  }
  expect(lines).toBe(5);
  expect(threads.testOnlyRunning()).toBe(0);
});
