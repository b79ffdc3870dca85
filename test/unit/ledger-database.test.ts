import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterSqliteOpen, beforeSqliteOpen, LedgerOpenError, openLedger, schemaVersion, sqliteFiles } from "../../src/adapters/sqlite/database.ts";
import { DataDirLock } from "../../src/adapters/sqlite/lock.ts";
import { checkPrivateFile, PrivatePathError } from "../../src/core/private-files.ts";
import { giveToOtherUser, OTHER_UID } from "../helpers/other-user.ts";
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

  test("a new ledger and its -wal and -shm are 0600, whatever the umask", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "l.db");
    const old = process.umask(0o022);
    let db: ReturnType<typeof openLedger>;
    try {
      db = openLedger(path, { migrations: ONE });
    } finally {
      process.umask(old);
    }
    db.run("INSERT INTO a (x) VALUES (1)");
    for (const f of [path, `${path}-wal`, `${path}-shm`]) expect(`${f} ${(statSync(f).mode & 0o777).toString(8)}`).toBe(`${f} 600`);
    db.close();
  });
});

describe("openLedger trusts only private files", () => {
  const refusedWith = (f: () => unknown, problem: PrivatePathError["problem"], message: string) => {
    let caught: unknown;
    try {
      f();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(PrivatePathError);
    expect((caught as PrivatePathError).problem).toBe(problem);
    expect((caught as PrivatePathError).message).toBe(message);
  };

  test("a ledger or side file group or others can read is refused and left as it was", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "l.db");
    openLedger(path, { migrations: ONE }).close();
    chmodSync(path, 0o640);
    refusedWith(() => openLedger(path, { migrations: ONE }), "open-to-others", `${path} is readable by others (mode 0640)`);
    expect(statSync(path).mode & 0o777).toBe(0o640);
    chmodSync(path, 0o600);
    writeFileSync(`${path}-shm`, "", { mode: 0o644 });
    refusedWith(() => openLedger(path, { migrations: ONE }), "open-to-others", `${path}-shm is readable by others (mode 0644)`);
  });

  test("a planted -wal or -journal another user owns is refused before SQLite can read it", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "l.db");
    openLedger(path, { migrations: ONE }).close();
    for (const side of ["-wal", "-journal"]) {
      const planted = `${path}${side}`;
      writeFileSync(planted, "their pages", { mode: 0o600 });
      giveToOtherUser(planted);
      refusedWith(
        () => openLedger(path, { migrations: ONE }),
        "foreign-owner",
        `${planted} is owned by uid ${OTHER_UID}, not by this user (uid ${process.geteuid!()})`,
      );
      expect(readFileSync(planted, "utf8")).toBe("their pages");
      rmSync(planted);
    }
    // Before the first open too: the database is not even made.
    const fresh = join(tmp.path, "fresh.db");
    writeFileSync(`${fresh}-wal`, "their pages", { mode: 0o600 });
    giveToOtherUser(`${fresh}-wal`);
    expect(() => openLedger(fresh, { migrations: ONE })).toThrow(PrivatePathError);
    expect(existsSync(fresh)).toBe(false);
  });

  test("a ledger another user owns, a linked ledger, a directory others can write: refused", () => {
    using tmp = tempDir();
    const theirs = join(tmp.path, "theirs.db");
    writeFileSync(theirs, "", { mode: 0o600 });
    giveToOtherUser(theirs);
    refusedWith(
      () => openLedger(theirs, { migrations: ONE }),
      "foreign-owner",
      `${theirs} is owned by uid ${OTHER_UID}, not by this user (uid ${process.geteuid!()})`,
    );

    const real = join(tmp.path, "real.db");
    openLedger(real, { migrations: ONE }).close();
    const link = join(tmp.path, "link.db");
    symlinkSync(real, link);
    refusedWith(() => openLedger(link, { migrations: ONE }), "symlink", `${link} is a symbolic link; refusing to follow it`);
    const dangling = join(tmp.path, "dangling.db");
    symlinkSync(join(tmp.path, "nowhere.db"), dangling);
    refusedWith(() => openLedger(dangling, { migrations: ONE }), "symlink", `${dangling} is a symbolic link; refusing to follow it`);
    expect(existsSync(join(tmp.path, "nowhere.db"))).toBe(false);

    const open = join(tmp.path, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    refusedWith(() => openLedger(join(open, "l.db"), { migrations: ONE }), "open-to-others", `${open} can be written by group or others (mode 0777)`);
    expect(readdirSync(open)).toEqual([]);
  });

  test("the checks never open a file SQLite holds: a lock held in this process survives them", async () => {
    // Closing any descriptor of a file drops every POSIX lock the process holds on it, so a check
    // that opened desk.lock (or a -shm) would silently hand the lock to the next process.
    using tmp = tempDir();
    const path = join(tmp.path, "desk.lock");
    const lock = DataDirLock.acquire(path, process.pid, Date.now())!;
    expect(lock).not.toBeNull();
    afterSqliteOpen(beforeSqliteOpen(path));
    for (const f of sqliteFiles(path)) checkPrivateFile(f, { mayBeMissing: true });
    const lockModule = join(import.meta.dir, "../../src/adapters/sqlite/lock.ts");
    const other = Bun.spawnSync([
      process.execPath,
      "-e",
      `const { DataDirLock } = await import(${JSON.stringify(lockModule)}); console.log(DataDirLock.acquire(${JSON.stringify(path)}, 1, 0) === null ? "refused" : "taken");`,
    ]);
    expect(other.stderr.toString()).toBe("");
    expect(other.stdout.toString()).toBe("refused\n");
    lock.release();
  });
});
