// Every statement the SQLite desk ledger prepares or queries, planned by SQLite itself. The
// tables that grow with every call (receipts, audit, reservations, spend, held results) may be
// read only through an index that bounds the rows to what is asked: an equality on its leading
// column (a range after it is fine: it stays inside that key, org or reservation), or an index
// that holds open rows only. A full scan, or a range over a leading column, fails the test unless
// the statement is one of the few named here with the reason its cost is what it was asked for.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { exportPageStatement } from "../../src/adapters/sqlite/desk/export-pages.ts";
import { checkLedger } from "../../src/core/desk/check.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, manualClock } from "./desk-harness.ts";

const GROWING = ["receipts", "audit", "reservations", "spend", "held_results"];
/** Partial indexes that hold only what is still open or not yet pruned, whatever the ledger's size. */
const OPEN_ONLY = ["reservations_open", "reservations_awaiting", "reservations_prunable"];
const WHOLE_ASKED: [RegExp, string][] = [
  [
    /^SELECT rowid AS cursor, \* FROM receipts WHERE rowid > \$after AND rowid <= \$last ORDER BY rowid LIMIT \$limit$/,
    "a page of the whole ledger's export: every row of its range is returned",
  ],
  [
    /^SELECT rowid AS cursor, payload, signature, envelope FROM receipts WHERE rowid > \$after AND rowid <= \$last ORDER BY rowid LIMIT \$limit$/,
    "a page of the whole ledger's export, on its thread: every row of its range is returned",
  ],
  [/FROM audit ORDER BY id LIMIT \$limit$/, "the first page of the whole audit log, in id order: stops at its limit"],
  [
    /^SELECT issued_at, payload FROM receipts WHERE NOT EXISTS \(SELECT 1 FROM audit AS kept WHERE kept\.receipt_id = receipts\.id\) ORDER BY rowid LIMIT \$limit$/,
    "the first page of the whole audit log's receipted calls, in rowid order: stops at its limit",
  ],
  // Known and left: with a time and no org or key, both read from the oldest row on (an index on
  // the time would cost every call its bytes); an operator's query, never the clearing path's.
  [
    /FROM receipts WHERE issued_at >= \$issued_at AND rowid > \$after AND rowid <= \$last ORDER BY rowid LIMIT \$limit$/,
    "the whole ledger's export from a time on (its records, and its bytes on the export thread)",
  ],
  [/FROM audit WHERE at >= \$at ORDER BY id LIMIT \$limit$/, "the whole audit log from a time on"],
  [
    /FROM receipts WHERE issued_at >= \$issued_at AND NOT EXISTS \(SELECT 1 FROM audit AS kept WHERE kept\.receipt_id = receipts\.id\) ORDER BY rowid LIMIT \$limit$/,
    "the whole audit log's receipted calls from a time on",
  ],
  [/^SELECT rowid, \* FROM receipts WHERE rowid > \? ORDER BY rowid LIMIT 1000$/, "migration 11 converts every receipt, once, a page at a time"],
];

let fx: UpstreamFixture;
const seen = new Set<string>();
const { prepare, query } = Database.prototype;

beforeAll(() => {
  fx = startUpstreamFixture();
  Database.prototype.prepare = function (this: Database, sql: string, ...rest: never[]) {
    seen.add(sql);
    return prepare.call(this, sql, ...rest);
  } as typeof prepare;
  Database.prototype.query = function (this: Database, sql: string) {
    seen.add(sql);
    return query.call(this, sql);
  } as typeof query;
});

afterAll(() => {
  Database.prototype.prepare = prepare;
  Database.prototype.query = query;
  fx.stop();
});

/** Which table a plan row reads, by the names and aliases its statement gives the growing tables. */
function tableOf(detail: string, sql: string): string | undefined {
  const name = /^(?:SCAN|SEARCH) (\S+)/.exec(detail)?.[1];
  if (name === undefined) return undefined;
  if (GROWING.includes(name)) return name;
  const alias = new RegExp(`\\b(${GROWING.join("|")})\\s+(?:AS\\s+)?${name}\\b`, "i").exec(sql);
  return alias?.[1];
}

function unbounded(detail: string, sql: string): boolean {
  const table = tableOf(detail, sql);
  if (table === undefined) return false;
  const index = /USING (?:COVERING )?INDEX (\S+)/.exec(detail)?.[1];
  if (index !== undefined && OPEN_ONLY.includes(index)) return false;
  if (detail.startsWith("SCAN ")) return true;
  // SEARCH: bounded when its first constraint is an equality (key=?, id=?, rowid=?); one with no
  // constraint is SQLite's min()/max() lookup at one end of an index.
  const constraint = /\(([^)]*)\)/.exec(detail)?.[1];
  return constraint !== undefined && !/^\w+=/.test(constraint);
}

test("no statement of the desk ledger reads a growing table past what it was asked for", { timeout: 60_000 }, async () => {
  const clock = manualClock("2026-03-01T10:00:00Z");
  {
    await using t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo", "fx__fail_5xx"], priceMc: 100, upstreamCostMc: 10 }, { now: clock.now });
    const a = await t.makeKey({ budget_mc: 1_000, reset: "daily", allow: ["fx__echo", "fx__fail_5xx"] });
    const b = await t.makeKey({ budget_mc: 100, reset: "none", allow: ["fx__echo"] });
    for (let i = 0; i < 3; i++) expect((await t.call(a.secret, "fx__echo", { text: `hi ${i}` })).status).toBe(200);
    expect((await t.call(a.secret, "fx__fail_5xx", {})).status).toBe(502);
    expect((await t.call(b.secret, "fx__echo", { text: "one" })).status).toBe(200);
    expect((await t.call(b.secret, "fx__echo", { text: "two" })).status).toBe(402);
    expect((await t.call(b.secret, "fx__fail_5xx", {})).status).toBe(403);
    clock.advance(86_400_000);
    expect((await t.call(a.secret, "fx__echo", { text: "next day" })).status).toBe(200);
    for (const q of [
      "",
      `?org_id=${a.orgId}`,
      `?key_id=${a.keyId}`,
      `?org_id=${a.orgId}&key_id=${a.keyId}`,
      "?since=2026-03-01T00:00:00Z",
      `?org_id=${a.orgId}&since=2026-03-01T00:00:00Z`,
      `?key_id=${a.keyId}&since=2026-03-01T00:00:00Z`,
    ]) {
      expect((await t.admin("GET", `/admin/audit${q}`)).status).toBe(200);
      if (!q.includes("key_id")) {
        const exported = await t.admin("GET", `/admin/receipts${q}`);
        expect(exported.status).toBe(200);
        // the export reads the ledger as its body is read
        expect((await exported.text()).length).toBeGreaterThan(0);
        // on the export thread, whose statements this thread's hooks do not see: planned here
        const filter = { orgId: q.includes("org_id") ? a.orgId : null, sinceMs: q.includes("since") ? Date.parse("2026-03-01T00:00:00Z") : null };
        seen.add(exportPageStatement(filter).sql);
        // the same receipts as records, a page at a time (RecordStore.receiptPages)
        for await (const page of t.ledger.records.receiptPages(filter, 10)) expect(page.length).toBeGreaterThan(0);
      }
    }
    const listing = new Request("http://127.0.0.1/v1/receipts?since=2026-03-01T00:00:00Z&limit=10", { headers: { authorization: `Bearer ${a.secret}` } });
    expect((await t.handler(listing)).status).toBe(200);
    expect((await t.admin("GET", `/admin/keys/${a.keyId}`)).status).toBe(200);
    expect((await t.admin("PATCH", `/admin/keys/${a.keyId}`, { budget_mc: 2_000 })).status).toBe(200);
    await t.desk.sweepStale();
    const beforeCheck = new Set(seen);
    expect((await checkLedger(t.ledger)).problems).toEqual([]);
    // desk check reads the whole ledger: that is what it is asked for (its memory is bounded apart).
    for (const sql of seen) if (!beforeCheck.has(sql)) seen.delete(sql);
    planAll(t.ledger.testOnlyDatabase());
  }
});

function planAll(db: Database): void {
  const planned: string[] = [];
  const unboundedReads: string[] = [];
  for (const sql of seen) {
    const text = sql.trim();
    if (!/^(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(text)) continue;
    let plan: { detail: string }[];
    try {
      plan = query.call(db, `EXPLAIN QUERY PLAN ${text}`).all() as { detail: string }[];
    } catch {
      continue; // another database's statement (the ask ledger, a checkpoint worker's pragma)
    }
    planned.push(text);
    const bad = plan.filter((row) => unbounded(row.detail, text));
    if (bad.length > 0 && !WHOLE_ASKED.some(([re]) => re.test(text.replace(/\s+/g, " ")))) {
      unboundedReads.push(`${text.replace(/\s+/g, " ")}\n  -> ${bad.map((r) => r.detail).join("; ")}`);
    }
  }
  expect(planned.length).toBeGreaterThan(20);
  expect(unboundedReads).toEqual([]);
}
