import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { LedgerOpenError, openLedger, schemaVersion } from "../../src/core/ledger/database.ts";
import { tempDir } from "../helpers/tmp.ts";

const ONE = [{ name: "one", sql: "CREATE TABLE a (x INTEGER)" }];
const TWO = [...ONE, { name: "two", sql: "CREATE TABLE b (y INTEGER)" }];

describe("openLedger", () => {
  test("applies migrations in order and records the version", () => {
    const db = openLedger(":memory:", { migrations: TWO });
    expect(schemaVersion(db)).toBe(2);
    db.run("INSERT INTO b (y) VALUES (1)");
    db.close();
  });

  test("upgrades an older file and refuses a newer one", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "l.db");
    openLedger(path, { migrations: ONE }).close();
    const db = openLedger(path, { migrations: TWO });
    expect(schemaVersion(db)).toBe(2);
    expect(db.query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
    db.close();
    expect(() => openLedger(path, { migrations: ONE })).toThrow(LedgerOpenError);
    expect(() => openLedger(path, { migrations: ONE })).toThrow(/schema is version 2, newer than this binary knows \(1\)/);
  });
});
