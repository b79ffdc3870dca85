// Fail closed on PostgreSQL: what Bun's client raises when the server is down, restarts, breaks
// a transaction or stops answering, how the adapter classifies it (unavailable / constraint /
// bug), how fast a call learns it, and that the same pool works again, by itself, when the
// server is back.
import { describe, expect, test } from "bun:test";
import type { SQL } from "bun";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { classifyFailure, DeadlineExceeded, withDeadline } from "../../src/adapters/postgres/errors.ts";
import { type CallInput, reserve } from "../../src/adapters/postgres/money.ts";
import { hourOf } from "../../src/core/desk/period.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { addKey, addNode, freshLedger, signingMaker } from "../helpers/postgres-ledger.ts";

const pg = usePostgres();

const T = Date.parse("2026-11-30T12:00:00.000Z");
const call = (keyId: string): CallInput => ({
  keyId,
  tool: "up__t",
  priceMc: 100,
  upstreamCostMc: 10,
  paramsSha256: "e".repeat(64),
  now: T,
  hour: hourOf(T),
  period: "none",
});

/** How a promise failed, and how long it took. */
async function failure(p: Promise<unknown>): Promise<{ kind: string; code: string | undefined; state: string | undefined; ms: number } | null> {
  const start = performance.now();
  try {
    await p;
    return null;
  } catch (err) {
    const e = err as { code?: string; errno?: string };
    return { kind: classifyFailure(err), code: e.code, state: e.errno, ms: performance.now() - start };
  }
}

describe("classification of what the server answers", () => {
  test("a broken rule is a constraint; a fault of ours is a bug; a timeout or a lock wait is unavailable", async () => {
    await using ledger = await freshLedger(pg.server);
    const sql = ledger.sql;
    const key = await addKey(sql, { budgetMc: 10 });
    expect(await failure(sql`INSERT INTO orgs (id, name, created_at) VALUES (${key.orgId}, 'again', 0)`)).toMatchObject({ kind: "constraint", state: "23505" });
    expect(await failure(sql`UPDATE keys SET spent_mc = 11`)).toMatchObject({ kind: "constraint", state: "23514" });
    expect(await failure(sql`INSERT INTO keys (id) VALUES ('k')`)).toMatchObject({ kind: "constraint", state: "23502" });
    expect(await failure(sql`INSERT INTO tools (name, upstream, upstream_tool, description, input_schema) VALUES ('x', 'nope', 'x', '', '{}')`)).toMatchObject({
      kind: "constraint",
      state: "23503",
    });
    expect(await failure(sql.unsafe("SELEC 1"))).toMatchObject({ kind: "bug", state: "42601" });
    expect(await failure(sql`SELECT * FROM no_such_table`)).toMatchObject({ kind: "bug", state: "42P01" });
    expect(await failure(sql`SELECT 1 / 0`)).toMatchObject({ kind: "bug", state: "22012" });
    expect(await failure(sql`SELECT ${"x"}::bigint`)).toMatchObject({ kind: "bug", state: "22P02" });
    expect(await failure(sql.begin(async (tx) => [await tx`SET LOCAL statement_timeout = '50ms'`, await tx`SELECT pg_sleep(1)`]))).toMatchObject({
      kind: "unavailable",
      state: "57014",
    });
    // A transaction holding the key row, and another that waits past lock_timeout for it.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const lockedYet = new Promise<void>((r) => (locked = r));
    const holder = ledger.pool(1).begin(async (tx) => {
      await tx`SELECT 1 FROM keys WHERE id = ${key.id} FOR UPDATE`;
      locked();
      await held;
    });
    await lockedYet;
    const waiter = ledger.pool(1);
    expect(
      await failure(waiter.begin(async (tx) => [await tx`SET LOCAL lock_timeout = '100ms'`, await tx`UPDATE keys SET name = 'x' WHERE id = ${key.id}`])),
    ).toMatchObject({
      kind: "unavailable",
      state: "55P03",
    });
    release();
    await holder;
  });

  test("errors that never reached a server: a deadline is unavailable, anything else a bug", () => {
    expect(classifyFailure(new DeadlineExceeded("late"))).toBe("unavailable");
    expect(classifyFailure(new TypeError("x is undefined"))).toBe("bug");
    expect(classifyFailure("a string")).toBe("bug");
    expect(classifyFailure({ code: "ERR_POSTGRES_INVALID_TRANSACTION_STATE" })).toBe("bug");
    expect(classifyFailure({ code: "ECONNRESET" })).toBe("unavailable");
  });

  test("a login the server refuses, or a database that is gone, is unavailable on a running node", async () => {
    const { url, name } = await pg.server.createDatabase();
    const wrong = openPool(parseDatabaseUrl(url.replace(pg.server.password, "not-it")), { max: 1 });
    const missing = openPool(parseDatabaseUrl(url.replace(`/${name}`, "/no_such_database")), { max: 1 });
    try {
      expect(await failure(wrong`SELECT 1`)).toMatchObject({ kind: "unavailable", state: "28P01" });
      expect(await failure(missing`SELECT 1`)).toMatchObject({ kind: "unavailable", state: "3D000" });
    } finally {
      await Promise.all([wrong.close(), missing.close()]);
    }
  });
});

describe("the server goes away", () => {
  test("stopped: every call fails at once, classified unavailable, and a reservation writes nothing", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 1000 });
    const node = await addNode(ledger.sql, "node-a");
    for (const mode of ["fast", "immediate"] as const) {
      await pg.server.stop(mode);
      try {
        const results = await Promise.all(Array.from({ length: 20 }, () => failure(reserve(ledger.sql, call(key.id), node, 20, make))));
        for (const r of results) expect(r).toMatchObject({ kind: "unavailable", code: "ERR_POSTGRES_CONNECTION_REFUSED" });
        const slowest = Math.max(...results.map((r) => r!.ms));
        expect(slowest).toBeLessThan(2000);
      } finally {
        await pg.server.start();
      }
    }
    expect(await ledger.sql`SELECT spent_mc FROM keys`).toEqual([{ spent_mc: 0n }] as never);
  });

  test("back again: the same pool serves the very next call, without being recreated", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 1000 });
    const node = await addNode(ledger.sql, "node-a");
    for (const mode of ["fast", "immediate"] as const) {
      // Connections open and idle in the pool when the server goes.
      await Promise.all(Array.from({ length: 8 }, () => ledger.sql`SELECT pg_sleep(0.02)`));
      await pg.server.stop(mode);
      await pg.server.start();
      expect(await reserve(ledger.sql, call(key.id), node, 20, make)).toMatchObject({ kind: "reserved" });
    }
    expect(await ledger.sql`SELECT spent_mc FROM keys`).toEqual([{ spent_mc: 200n }] as never);
  });

  test("mid-transaction: the transaction fails unavailable and nothing of it is committed", async () => {
    await using ledger = await freshLedger(pg.server);
    const key = await addKey(ledger.sql, { budgetMc: 1000 });
    for (const mode of ["fast", "immediate"] as const) {
      const broken = ledger.sql.begin(async (tx) => {
        await tx`UPDATE keys SET spent_mc = spent_mc + 100 WHERE id = ${key.id}`;
        await pg.server.stop(mode);
        await tx`UPDATE keys SET spent_mc = spent_mc + 100 WHERE id = ${key.id}`;
      });
      expect(await failure(broken)).toMatchObject({ kind: "unavailable" });
      await pg.server.start();
    }
    expect(await ledger.sql`SELECT spent_mc FROM keys`).toEqual([{ spent_mc: 0n }] as never);
  });

  test("a query running when the server stops fails unavailable (57P01) at once", async () => {
    await using ledger = await freshLedger(pg.server);
    const running = ledger.sql`SELECT pg_sleep(30)`;
    const result = failure(running);
    await untilRunning(ledger.pool(1), "pg_sleep(30)");
    await pg.server.stop("fast");
    await pg.server.start();
    expect(await result).toMatchObject({ kind: "unavailable", state: "57P01" });
  });
});

describe("the server stops answering", () => {
  test("frozen: a call with a deadline fails unavailable at its deadline (without one it would wait); thawed, the pool serves again", async () => {
    await using ledger = await freshLedger(pg.server);
    const fresh = ledger.pool(2);
    await ledger.sql`SELECT 1`;
    pg.server.freeze();
    let unbounded: Promise<unknown> | null = null;
    let unboundedSettled = false;
    try {
      unbounded = ledger.sql`SELECT 1 AS late`.finally(() => {
        unboundedSettled = true;
      });
      const query = ledger.sql`SELECT 2`;
      const onOpenConnection = await failure(withDeadline(500, query, () => query.cancel()));
      expect(onOpenConnection).toMatchObject({ kind: "unavailable", code: "DEADLINE_EXCEEDED" });
      expect(onOpenConnection!.ms).toBeGreaterThanOrEqual(490);
      expect(onOpenConnection!.ms).toBeLessThan(1500);
      // A new connection to the frozen server: its TCP handshake succeeds, its login never does.
      const onNewConnection = await failure(withDeadline(500, fresh`SELECT 3`));
      expect(onNewConnection).toMatchObject({ kind: "unavailable", code: "DEADLINE_EXCEEDED" });
      expect(unboundedSettled).toBe(false);
    } finally {
      pg.server.thaw();
    }
    expect(await unbounded).toEqual([{ late: 1 }] as never);
    expect(await withDeadline(5000, ledger.sql`SELECT 4 AS n`)).toEqual([{ n: 4 }] as never);
    expect(await withDeadline(5000, fresh`SELECT 5 AS n`)).toEqual([{ n: 5 }] as never);
  }, 30_000);

  test("a node that vanished mid-transaction holds a key's row no longer than idle_in_transaction_session_timeout", async () => {
    await using ledger = await freshLedger(pg.server);
    const key = await addKey(ledger.sql, { budgetMc: 1000 });
    const vanished = openPool(parseDatabaseUrl(ledger.url), { max: 1, idleInTransactionTimeoutMs: 300 });
    let locked!: () => void;
    const lockedYet = new Promise<void>((r) => (locked = r));
    // The transaction takes the row and then never goes on, as a frozen or partitioned node's.
    const abandoned = vanished.begin(async (tx) => {
      await tx`UPDATE keys SET spent_mc = spent_mc + 100 WHERE id = ${key.id}`;
      locked();
      await new Promise(() => {});
    });
    abandoned.catch(() => {});
    await lockedYet;
    const start = performance.now();
    await ledger.sql`UPDATE keys SET name = 'after' WHERE id = ${key.id}`;
    const waited = performance.now() - start;
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(waited).toBeLessThan(3000);
    expect(await ledger.sql`SELECT spent_mc, name FROM keys`).toEqual([{ spent_mc: 0n, name: "after" }] as never);
    await vanished.close({ timeout: 0 });
  });
});

/** Resolves once this database runs a statement containing `text` (seen from another session). */
async function untilRunning(sql: SQL, text: string): Promise<void> {
  for (;;) {
    const [row] = await sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE ${`%${text}%`} AND pid <> pg_backend_pid()`;
    if (row.n > 0) break;
    await sql`SELECT pg_sleep(0.01)`;
  }
  await sql.close();
}
