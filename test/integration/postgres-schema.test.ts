// The PostgreSQL desk ledger's schema: migrations run once however many nodes start together,
// a newer schema is refused, receipts and the audit log refuse every change through SQL, a key
// can never spend past its budget, catalog changes move the catalog version, and set-once meta
// values stay set.
import { describe, expect, test } from "bun:test";
import type { SQL } from "bun";
import { PostgresCatalog, readCatalogVersion } from "../../src/adapters/postgres/catalog.ts";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { Db } from "../../src/adapters/postgres/db.ts";
import { classifyFailure, violatedConstraint } from "../../src/adapters/postgres/errors.ts";
import { migrate, SchemaTooNew, schemaVersion } from "../../src/adapters/postgres/migrate.ts";
import { PostgresRecords } from "../../src/adapters/postgres/records.ts";
import { POSTGRES_MIGRATIONS } from "../../src/adapters/postgres/schema.ts";
import { Catalog } from "../../src/core/desk/catalog.ts";
import { listSigningKeys, registerSigningKey } from "../../src/adapters/postgres/signing-keys.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { addKey, addNode, freshLedger } from "../helpers/postgres-ledger.ts";

const pg = usePostgres();

const failureOf = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e) => ({ state: e.errno as string, kind: classifyFailure(e), constraint: violatedConstraint(e) ?? null, message: String(e.message) }),
  );

describe("migrations", () => {
  test("eight nodes migrating an empty database at once: the schema is made once, none fails, all see the final version", async () => {
    const { url } = await pg.server.createDatabase();
    const nodes = Array.from({ length: 8 }, () => openPool(parseDatabaseUrl(url), { max: 2 }));
    try {
      const results = await Promise.allSettled(nodes.map((sql) => migrate(sql)));
      expect(results.map((r) => r.status)).toEqual(Array(8).fill("fulfilled"));
      const values = results.map((r) => (r as PromiseFulfilledResult<{ from: number; to: number }>).value);
      const known = POSTGRES_MIGRATIONS.length;
      expect(values.filter((v) => v.from === 0)).toEqual([{ from: 0, to: known }]);
      expect(values.filter((v) => v.from !== 0)).toEqual(Array(7).fill({ from: known, to: known }));
      expect(await Promise.all(nodes.map((sql) => schemaVersion(sql)))).toEqual(Array(8).fill(known));
      expect(await nodes[0]!`SELECT count(*)::int AS n FROM catalog_version`).toEqual([{ n: 1 }] as never);
    } finally {
      await Promise.all(nodes.map((sql) => sql.close()));
    }
  });

  test("a second start migrates nothing; a schema newer than the binary knows is refused and left as it is", async () => {
    await using ledger = await freshLedger(pg.server);
    expect(await migrate(ledger.sql)).toEqual({ from: POSTGRES_MIGRATIONS.length, to: POSTGRES_MIGRATIONS.length });
    await ledger.sql`UPDATE schema_version SET version = version + 1`;
    const refused = await migrate(ledger.sql).then(
      () => null,
      (e) => e,
    );
    expect(refused).toBeInstanceOf(SchemaTooNew);
    expect(refused.message).toBe(
      `the database schema is version ${POSTGRES_MIGRATIONS.length + 1}, newer than this binary knows (${POSTGRES_MIGRATIONS.length})`,
    );
    expect(await schemaVersion(ledger.sql)).toBe(POSTGRES_MIGRATIONS.length + 1);
  });

  test("a failing migration leaves the database as it was (one transaction)", async () => {
    const { url } = await pg.server.createDatabase();
    const sql = openPool(parseDatabaseUrl(url), { max: 1 });
    try {
      const broken = [...POSTGRES_MIGRATIONS, { name: "broken", sql: "CREATE TABLE later (x int); SELECT 1/0;" }];
      expect(await failureOf(migrate(sql, broken))).toMatchObject({ state: "22012", kind: "bug" });
      expect(await schemaVersion(sql)).toBe(0);
      expect(await sql`SELECT to_regclass('ask_only.keys') AS t`).toEqual([{ t: null }] as never);
    } finally {
      await sql.close();
    }
  });
});

describe("append-only receipts and audit", () => {
  async function withRows(run: (sql: SQL) => Promise<void>) {
    await using ledger = await freshLedger(pg.server);
    const key = await addKey(ledger.sql, { budgetMc: 10 });
    await ledger.sql`
      INSERT INTO receipts (id, org_id, key_id, seq, issued_at, outcome, period, amount_mc, payload, signature)
      VALUES ('rcpt_1', ${key.orgId}, ${key.id}, 1, 0, 'charged', 'none', 5, '{}', ${new Uint8Array(64)})`;
    await ledger.sql`
      INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
      VALUES (0, ${key.orgId}, ${key.id}, 't', 'refused_tool_unknown', 404, 5, 1, 4, NULL)`;
    await run(ledger.sql);
  }

  test("UPDATE, DELETE and TRUNCATE of a receipt are refused, even as the superuser, and the row stays", () =>
    withRows(async (sql) => {
      for (const change of [
        sql`UPDATE receipts SET amount_mc = 0`,
        sql`DELETE FROM receipts`,
        sql`TRUNCATE receipts`,
        sql.unsafe("UPDATE receipts SET payload = '{\"forged\":true}' WHERE id = 'rcpt_1'"),
        sql.unsafe("UPDATE receipts SET signature = '\\x00' WHERE id = 'rcpt_1'"),
      ]) {
        expect(await failureOf(change)).toMatchObject({ state: "23000", kind: "constraint", message: "receipts is append-only" });
      }
      expect(await sql`SELECT id, amount_mc FROM receipts`).toEqual([{ id: "rcpt_1", amount_mc: 5n }] as never);
      expect(await sql`SELECT current_setting('is_superuser') AS su`).toEqual([{ su: "on" }] as never);
    }));

  test("UPDATE, DELETE and TRUNCATE of the audit log are refused, and its rows stay", () =>
    withRows(async (sql) => {
      for (const change of [sql`UPDATE audit SET margin_mc = 0`, sql`DELETE FROM audit`, sql`TRUNCATE audit`]) {
        expect(await failureOf(change)).toMatchObject({ state: "23000", kind: "constraint", message: "audit is append-only" });
      }
      expect(await sql`SELECT margin_mc FROM audit`).toEqual([{ margin_mc: 4n }] as never);
    }));
});

describe("money columns", () => {
  test("no write can take a key's spend past its budget or below zero", async () => {
    await using ledger = await freshLedger(pg.server);
    const key = await addKey(ledger.sql, { budgetMc: 100 });
    expect(await failureOf(ledger.sql`UPDATE keys SET spent_mc = 101 WHERE id = ${key.id}`)).toMatchObject({
      state: "23514",
      kind: "constraint",
      constraint: "keys_spent_within_budget",
    });
    expect(await failureOf(ledger.sql`UPDATE keys SET spent_mc = -1 WHERE id = ${key.id}`)).toMatchObject({
      state: "23514",
      constraint: "keys_spent_within_budget",
    });
    await ledger.sql`UPDATE keys SET spent_mc = 100 WHERE id = ${key.id}`;
    expect(await failureOf(ledger.sql`UPDATE keys SET budget_mc = 99 WHERE id = ${key.id}`)).toMatchObject({ constraint: "keys_spent_within_budget" });
  });

  test("money is bigint: 2^53 - 1 millicents is stored and read back exactly", async () => {
    await using ledger = await freshLedger(pg.server);
    const key = await addKey(ledger.sql, { budgetMc: Number.MAX_SAFE_INTEGER });
    await ledger.sql`UPDATE keys SET spent_mc = budget_mc WHERE id = ${key.id}`;
    expect(await ledger.sql`SELECT budget_mc, spent_mc, pg_typeof(budget_mc)::text AS type FROM keys WHERE id = ${key.id}`).toEqual([
      { budget_mc: 9007199254740991n, spent_mc: 9007199254740991n, type: "bigint" },
    ] as never);
  });
});

describe("the catalog version", () => {
  test("moves with every statement that changes an upstream, a tool or a price, and with nothing else", async () => {
    await using ledger = await freshLedger(pg.server);
    const sql = ledger.sql;
    const v0 = await readCatalogVersion(sql);
    await sql`INSERT INTO upstreams (name, url, header_names, created_at, refreshed_at) VALUES ('up', 'http://x', '{}', 0, 0)`;
    const v1 = await readCatalogVersion(sql);
    await sql`INSERT INTO tools (name, upstream, upstream_tool, description, input_schema) VALUES ('up__a', 'up', 'a', '', '{}'), ('up__b', 'up', 'b', '', '{}')`;
    const v2 = await readCatalogVersion(sql);
    await sql`UPDATE tools SET price_mc = 1500 WHERE name = 'up__a'`;
    const v3 = await readCatalogVersion(sql);
    await addKey(sql, { budgetMc: 5 });
    await sql`INSERT INTO meta (name, value) VALUES ('x', 'y')`;
    const v4 = await readCatalogVersion(sql);
    await sql`UPDATE tools SET active = false WHERE upstream = 'up'`;
    await sql`DELETE FROM tools WHERE name = 'up__b'`;
    const v5 = await readCatalogVersion(sql);
    expect([v1 - v0, v2 - v1, v3 - v2, v4 - v3, v5 - v4]).toEqual([1, 1, 1, 0, 2]);
  });

  test("a catalog change made through one node is seen by another node's catalog at its next check", async () => {
    await using ledger = await freshLedger(pg.server);
    const here = new Catalog(new PostgresCatalog(new Db(ledger.sql, () => {})), () => {});
    const there = new PostgresCatalog(new Db(ledger.pool(1), () => {}));
    await here.reload();
    expect(await here.changed()).toBe(false);
    await there.addUpstream({ name: "up", kind: "mcp", url: "http://127.0.0.1:9/mcp", auth: null, document: null, sealedFields: {}, now: 0 }, [
      { name: "up__a", upstreamTool: "a", description: "", inputSchema: { type: "object" }, listing: {}, operation: null },
    ]);
    expect(await here.changed()).toBe(true);
    await here.reload();
    expect(here.tool("up__a")).toBeDefined();
    expect(await here.changed()).toBe(false);
    expect(await there.setPrice("up__a", 1500, 100)).toBe(true);
    expect(await here.changed()).toBe(true);
  });
});

describe("signing keys of every node", () => {
  test("each node has one current key; a rotation retires only that node's previous key; every key stays listed", async () => {
    await using ledger = await freshLedger(pg.server);
    await addNode(ledger.sql, "node-a");
    await addNode(ledger.sql, "node-b");
    await registerSigningKey(ledger.sql, "node-a", "kid-a1", '{"x":"a1"}', 100);
    await registerSigningKey(ledger.sql, "node-b", "kid-b1", '{"x":"b1"}', 200);
    await registerSigningKey(ledger.sql, "node-a", "kid-a2", '{"x":"a2"}', 300);
    await registerSigningKey(ledger.sql, "node-a", "kid-a2", '{"x":"a2"}', 400);
    expect((await listSigningKeys(ledger.sql)).map((k) => [k.kid, k.node_id, k.retired_at])).toEqual([
      ["kid-a2", "node-a", null],
      ["kid-b1", "node-b", null],
      ["kid-a1", "node-a", 300],
    ]);
    // Two current keys for one node cannot exist, whatever writes the table.
    expect(await failureOf(ledger.sql`INSERT INTO signing_keys (kid, node_id, public_jwk, created_at) VALUES ('kid-a3', 'node-a', '{}', 500)`)).toMatchObject({
      state: "23505",
      constraint: "signing_keys_current",
    });
  });
});

describe("set-once meta", () => {
  test("the first of many nodes claiming a value sets it; every node gets that value back", async () => {
    await using ledger = await freshLedger(pg.server);
    const nodes = Array.from({ length: 6 }, () => ledger.pool(2));
    const records = nodes.map((sql) => new PostgresRecords(new Db(sql, () => {}), null));
    const won = await Promise.all(records.flatMap((r, i) => [r.setMetaOnce("sealing_key_sha256", `fp${i}`), r.setMetaOnce("sealing_key_sha256", `fp${i}`)]));
    expect(won.filter((w) => w)).toHaveLength(1);
    const [stored] = await ledger.sql`SELECT value FROM meta WHERE name = 'sealing_key_sha256'`;
    expect(new Set(await Promise.all(records.map((r) => r.meta("sealing_key_sha256"))))).toEqual(new Set([stored.value]));
  });

  test("a claim that waited for another node's insert to commit returns that node's value", async () => {
    await using ledger = await freshLedger(pg.server);
    const first = ledger.pool(1);
    const second = ledger.pool(1);
    let inserted!: () => void;
    let commit!: () => void;
    const insertedYet = new Promise<void>((r) => (inserted = r));
    const gate = new Promise<void>((r) => (commit = r));
    const holder = first.begin(async (tx) => {
      await tx`INSERT INTO meta (name, value) VALUES ('sealing_key_sha256', 'first')`;
      inserted();
      await gate;
    });
    await insertedYet;
    const records = new PostgresRecords(new Db(second, () => {}), null);
    const claim = records.setMetaOnce("sealing_key_sha256", "second");
    await untilWaitingOnALock(ledger.sql);
    commit();
    await holder;
    expect(await claim).toBe(false);
    expect(await records.meta("sealing_key_sha256")).toBe("first");
  });
});

/** Resolves once some session of this database waits for a lock (the claim above, blocked). */
async function untilWaitingOnALock(sql: SQL): Promise<void> {
  for (;;) {
    const [row] = await sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    if (row.n > 0) return;
    await sql`SELECT pg_sleep(0.01)`;
  }
}
