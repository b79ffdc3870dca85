// What a call costs the ledger on disk: N clearings through the real desk (the clearing path, its
// receipts and reservations; a receipted call writes no audit row), housekeeping run, then every byte SQLite holds for
// them (dbstat: tables and indexes, free pages included) divided by N. The promise is
// RELIABILITY.md's storage cost per call; the breakdown is printed so a regression names its table.
import type { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock } from "./desk-harness.ts";

const CALLS = 20_000;
const IN_FLIGHT = 16;
/** RELIABILITY.md: ledger bytes per call. */
const MAX_BYTES_PER_CALL = 1200;

let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(() => fx.stop());

/** Bytes per table and index (pages SQLite holds for it), largest first. */
function bytesByObject(db: Database): { name: string; bytes: number }[] {
  return db.query("SELECT name, sum(pgsize) AS bytes FROM dbstat GROUP BY name ORDER BY bytes DESC").all() as { name: string; bytes: number }[];
}

test(`a clearing costs the ledger at most ${MAX_BYTES_PER_CALL} bytes`, { timeout: 300_000 }, async () => {
  const clock = manualClock("2026-03-01T10:00:00Z");
  await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 100, upstreamCostMc: 10 }, { now: clock.now });
  const k = await t.makeKey({ budget_mc: 1_000_000_000, reset: "monthly", allow: ["fx__echo"] });
  const db = t.ledger.testOnlyDatabase();
  const before = bytesByObject(db);
  const pageSize = (db.query("PRAGMA page_size").get() as { page_size: number }).page_size;
  const startPages = (db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
  let sent = 0;
  let walMax = 0;
  const worker = async () => {
    while (sent < CALLS) {
      const n = sent++;
      if (n % 500 === 0) walMax = Math.max(walMax, statSync(`${t.dbPath}-wal`, { throwIfNoEntry: false })?.size ?? 0);
      const r = await t.call(k.secret, "fx__echo", { text: `call ${n}` });
      if (r.status !== 200) throw new Error(`call ${n}: ${r.status} ${await r.text()}`);
      await r.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  // Housekeeping once the calls are past every late settlement: settled reservations go.
  clock.advance(2 * 3_600_000);
  const prune = t.ledger.money.pruneSettled.bind(t.ledger.money);
  let longestBatch = 0;
  t.ledger.money.pruneSettled = async (beforeMs, limit) => {
    const start = performance.now();
    try {
      return await prune(beforeMs, limit);
    } finally {
      longestBatch = Math.max(longestBatch, performance.now() - start);
    }
  };
  const pruneStart = performance.now();
  await t.desk.sweepStale();
  const walAfter = statSync(`${t.dbPath}-wal`, { throwIfNoEntry: false })?.size ?? 0;
  console.log(`largest WAL seen: ${(walMax / 1e6).toFixed(1)} MB during the calls, ${(walAfter / 1e6).toFixed(1)} MB after housekeeping`);
  console.log(
    `housekeeping (the sweep, settled reservations pruned) in ${(performance.now() - pruneStart).toFixed(0)} ms, longest batch ${longestBatch.toFixed(1)} ms`,
  );
  // The newest stays, so no reservation id is ever given twice.
  expect(db.query("SELECT count(*) AS n FROM reservations").get()).toEqual({ n: 1 });
  await t.ledger.checkpointNow();
  const after = bytesByObject(db);
  const was = new Map(before.map((o) => [o.name, o.bytes]));
  const grown = after.map((o) => ({ name: o.name, perCall: (o.bytes - (was.get(o.name) ?? 0)) / CALLS })).filter((o) => o.perCall > 0.5);
  const perCall = grown.reduce((sum, o) => sum + o.perCall, 0);
  const pages = (db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
  const lines = grown.map((o) => `  ${o.name.padEnd(32)} ${o.perCall.toFixed(1).padStart(8)} B/call`);
  console.log(
    `ledger bytes per call over ${CALLS} clearings: ${perCall.toFixed(1)} (file: ${(((pages - startPages) * pageSize) / CALLS).toFixed(1)})\n${lines.join("\n")}`,
  );
  // A charged call's audit entry is read out of its receipt: the audit log and its indexes do not grow.
  expect(grown.filter((o) => o.name.startsWith("audit"))).toEqual([]);
  expect(perCall).toBeLessThanOrEqual(MAX_BYTES_PER_CALL);
});
