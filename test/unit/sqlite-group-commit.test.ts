// The group commit's transactions on a real SQLite database: a batch runs as one plain
// transaction (no savepoint per operation), and one operation that throws costs the batch a
// second run in which each operation has a savepoint of its own, so only that one is lost.
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { sqlOf } from "../../src/adapters/sqlite/desk/connection.ts";
import { GroupCommit } from "../../src/adapters/sqlite/desk/group-commit.ts";

function fixture() {
  const db = new Database(":memory:");
  db.run("CREATE TABLE t (name TEXT PRIMARY KEY)");
  const sql = sqlOf(db);
  const names = () => (db.query("SELECT name FROM t ORDER BY name").all() as { name: string }[]).map((r) => r.name);
  const add = (name: string) => db.run("INSERT INTO t (name) VALUES (?)", [name]);
  return { db, sql, names, add };
}

/** A nested write that throws, caught by its caller: kept only when it ran inline (no savepoint undid it). */
function caughtInnerThrow(sql: ReturnType<typeof sqlOf>, add: (name: string) => void, name: string): void {
  try {
    sql.immediate(() => {
      add(name);
      throw new Error("inner");
    });
  } catch {}
}

test("immediate nested in immediate is a savepoint; nested in whole it runs inline", () => {
  const { sql, names, add } = fixture();
  sql.immediate(() => caughtInnerThrow(sql, add, "savepointed"));
  expect(names()).toEqual([]);
  sql.whole(() => caughtInnerThrow(sql, add, "inline"));
  expect(names()).toEqual(["inline"]);
  expect(() =>
    sql.whole(() => {
      add("thrown");
      throw new Error("x");
    }),
  ).toThrow("x");
  expect(names()).toEqual(["inline"]);
  expect(() => sql.immediate(() => sql.whole(() => 1))).toThrow("cannot nest");
  // Outside whole again: nested immediates are savepoints once more.
  sql.immediate(() => caughtInnerThrow(sql, add, "savepointed again"));
  expect(names()).toEqual(["inline"]);
});

test("a batch where nothing throws runs as one plain transaction, each operation once", async () => {
  const { sql, names, add } = fixture();
  const commit = new GroupCommit(sql);
  const runs: string[] = [];
  const op = (name: string) => () => {
    runs.push(name);
    sql.immediate(() => add(name));
  };
  await Promise.all([commit.run(op("a")), commit.run(() => caughtInnerThrow(sql, add, "inner")), commit.run(op("b"))]);
  expect(runs).toEqual(["a", "b"]);
  // The inner write was kept: no savepoint stood between the operations and the batch.
  expect(names()).toEqual(["a", "b", "inner"]);
});

test("one operation that throws: the batch runs again, each operation alone, and only that one is lost", async () => {
  const { sql, names, add } = fixture();
  const commit = new GroupCommit(sql);
  const runs: string[] = [];
  const op = (name: string) => () => {
    runs.push(name);
    add(name);
    return name;
  };
  const results = await Promise.allSettled([
    commit.run(op("a")),
    commit.run(() => {
      runs.push("bad");
      add("bad");
      throw new Error("boom");
    }),
    commit.run(op("b")),
  ]);
  expect(results).toEqual([
    { status: "fulfilled", value: "a" },
    { status: "rejected", reason: new Error("boom") },
    { status: "fulfilled", value: "b" },
  ]);
  // The first run stopped at "bad" and rolled back whole; the second ran all three, each in a savepoint.
  expect(runs).toEqual(["a", "bad", "a", "bad", "b"]);
  expect(names()).toEqual(["a", "b"]);
});

test("a COMMIT that fails fails the whole batch, with no second run", async () => {
  const { db, sql, names, add } = fixture();
  db.run("CREATE TABLE parent (id INTEGER PRIMARY KEY)");
  db.run("CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)");
  db.run("PRAGMA foreign_keys = ON");
  const commit = new GroupCommit(sql);
  let runs = 0;
  const results = await Promise.allSettled([
    commit.run(() => {
      runs++;
      add("a");
    }),
    // A deferred foreign key is checked at COMMIT: the commit fails, not the operation.
    commit.run(() => {
      runs++;
      db.run("INSERT INTO child (parent) VALUES (7)");
    }),
  ]);
  expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
  expect(runs).toBe(2);
  expect(names()).toEqual([]);
});
