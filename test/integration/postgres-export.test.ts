// The PostgreSQL receipts export reads one fixed set of receipts, page by page, however the
// transactions writing receipts commit around it. A receipt's n is taken at INSERT and its row is
// seen at COMMIT, so a transaction holding a lower n can commit after one holding a higher: the
// export's bound is the last n handed out when it starts, and it waits for every transaction that
// may still commit one below it, without holding up the clearings meanwhile.
import { describe, expect, test } from "bun:test";
import type { SQL } from "bun";
import { parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { usePostgres } from "../helpers/postgres.ts";

const pg = usePostgres();
const T0 = Date.parse("2026-12-01T12:00:00Z");

let seq = 0;
/** A receipt row as the clearing path writes it (the export reads rows, not signatures). */
async function insertReceipt(sql: SQL, id: string, orgId = "org_x"): Promise<void> {
  seq += 1;
  // What the export reads back is the row's own payload: these rows need no valid signature.
  const payload = JSON.stringify({ v: 1, id, kid: "kid", org_id: orgId, key_id: `key_${id}`, seq: 1 });
  await sql`
    INSERT INTO receipts (id, org_id, key_id, seq, issued_at, outcome, period, amount_mc, payload, signature)
    VALUES (${id}, ${orgId}, ${`key_${id}`}, 1, ${BigInt(T0 + seq)}::bigint, 'charged', 'none', 1, ${payload}, ${new Uint8Array(64)})`;
}

async function withLedger(body: (ledger: PostgresDeskLedger, sql: SQL) => Promise<void>): Promise<void> {
  const { url } = await pg.server.createDatabase();
  const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: 4 } });
  try {
    await body(ledger, ledger.testOnlySql());
  } finally {
    await ledger.close();
  }
}

async function idsOf(pages: AsyncIterable<{ id: string }[]>): Promise<string[]> {
  const ids: string[] = [];
  for await (const page of pages) ids.push(...page.map((r) => r.id));
  return ids;
}

/**
 * Whether `p` is still pending after `ms`. What is asserted is that nothing happens meanwhile, so
 * there is no event to wait for: the window is long against a page read (a few ms).
 */
async function stillPending(p: Promise<unknown>, ms = 300): Promise<boolean> {
  return Promise.race([p.then(() => false), Bun.sleep(ms).then(() => true)]);
}

describe("the PostgreSQL export's bound", () => {
  test("a receipt whose lower n commits after a higher one's is in the export, which waits for it and holds no clearing up", async () => {
    await withLedger(async (ledger, sql) => {
      const late = await sql.reserve();
      try {
        await late`BEGIN`;
        await insertReceipt(late, "rcpt_late"); // takes the lower n, not committed yet
        await insertReceipt(sql, "rcpt_early"); // takes the higher n, committed at once
        const pages = ledger.records.receiptPages({ orgId: null, sinceMs: null }, 10)[Symbol.asyncIterator]();
        const first = pages.next();
        // A bound read from the committed rows alone would hand out rcpt_early's page now, without rcpt_late.
        expect(await stillPending(first)).toBe(true);
        // Clearings go on while it waits; this one's n is above the bound, so not in the export.
        await insertReceipt(sql, "rcpt_after");
        await late`COMMIT`;
        const page = await first;
        expect(page.done ? null : page.value.map((r) => r.id)).toEqual(["rcpt_late", "rcpt_early"]);
        expect((await pages.next()).done).toBe(true);
      } finally {
        late.release();
      }
    });
  }, 30_000);

  test("a transaction that rolls its receipt back leaves a gap below the bound, and the export goes on without it", async () => {
    await withLedger(async (ledger, sql) => {
      const undone = await sql.reserve();
      try {
        await undone`BEGIN`;
        await insertReceipt(undone, "rcpt_undone");
        await insertReceipt(sql, "rcpt_kept");
        const exported = idsOf(ledger.records.receiptPages({ orgId: null, sinceMs: null }, 10));
        expect(await stillPending(exported)).toBe(true);
        await undone`ROLLBACK`;
        expect(await exported).toEqual(["rcpt_kept"]);
      } finally {
        undone.release();
      }
    });
  }, 30_000);

  test("the receipts' sequence hands out one value at a time (CACHE 1), as the bound's proof needs", async () => {
    await withLedger(async (_ledger, sql) => {
      const [row] = await sql`SELECT seqcache FROM pg_sequence WHERE seqrelid = pg_get_serial_sequence('receipts', 'n')::regclass`;
      expect(Number(row.seqcache)).toBe(1);
    });
  });

  test("receipts committed while an org's export is read, below the bound or above it, never change what it returns", async () => {
    await withLedger(async (ledger, sql) => {
      for (let i = 0; i < 5; i++) await insertReceipt(sql, `rcpt_${i}`, i % 2 === 0 ? "org_a" : "org_b");
      const pages: string[][] = [];
      for await (const page of ledger.records.receiptPages({ orgId: "org_a", sinceMs: null }, 1)) {
        pages.push(page.map((r) => r.id));
        await insertReceipt(sql, `rcpt_during_${pages.length}`, "org_a");
      }
      expect(pages).toEqual([["rcpt_0"], ["rcpt_2"], ["rcpt_4"]]);
    });
  }, 30_000);
});
