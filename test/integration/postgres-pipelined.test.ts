// The pipelined transaction the PostgreSQL settlement runs in (adapters/postgres/pipelined.ts):
// BEGIN sent with the first statement and COMMIT with the last must still be one transaction
// that commits whole or not at all.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { pipelinedTransaction } from "../../src/adapters/postgres/pipelined.ts";
import { usePostgres } from "../helpers/postgres.ts";

const pg = usePostgres();
let sql: SQL;

beforeAll(async () => {
  const { url } = await pg.server.createDatabase();
  sql = new SQL(url, { max: 2 });
  await sql`CREATE TABLE t (id integer PRIMARY KEY)`;
});
afterAll(() => sql.close());

const ids = async () => ((await sql`SELECT id FROM t ORDER BY id`) as { id: number }[]).map((r) => r.id);

test("the first and the last statement run in one transaction, and commit", async () => {
  const [first, last] = await pipelinedTransaction(sql, async (tx, commitWith) => {
    const [a] = await tx`INSERT INTO t VALUES (1) RETURNING txid_current() AS x`;
    const [b] = await commitWith(tx`INSERT INTO t VALUES (2) RETURNING txid_current() AS x`);
    return [a.x, b.x];
  });
  expect(last).toBe(first);
  expect(await ids()).toEqual([1, 2]);
  await sql`DELETE FROM t`;
});

test("a failing last statement rolls back what came before it", async () => {
  await expect(
    pipelinedTransaction(sql, async (tx, commitWith) => {
      await tx`INSERT INTO t VALUES (10)`;
      return commitWith(tx`INSERT INTO t VALUES (10)`);
    }),
  ).rejects.toThrow(/duplicate key/);
  expect(await ids()).toEqual([]);
});

test("a body that throws before its last statement is rolled back, and the connection serves again", async () => {
  await expect(
    pipelinedTransaction(sql, async (tx) => {
      await tx`INSERT INTO t VALUES (20)`;
      throw new Error("signing failed");
    }),
  ).rejects.toThrow("signing failed");
  expect(await ids()).toEqual([]);
  const [again] = await pipelinedTransaction(sql, async (tx) => tx`SELECT count(*)::int AS n FROM t`);
  expect(again).toEqual({ n: 0 });
});

test("a body that sends no last statement commits at its end", async () => {
  await pipelinedTransaction(sql, async (tx) => tx`INSERT INTO t VALUES (30)`);
  expect(await ids()).toEqual([30]);
});
