// The desk ledger on SQLite: one file, one connection, every store of the ledger port
// (core/desk/ports.ts) built on it, the group commit the money path shares, and the thread that
// checkpoints the WAL. The connection is private; tests reach it through testOnlyDatabase().
import type { Database } from "bun:sqlite";
import type { DeskLedger } from "../../../core/desk/ports.ts";
import { openLedger } from "../database.ts";
import { SqliteAlerts } from "./alerts.ts";
import { SqliteCatalog } from "./catalog.ts";
import { SqliteCheck } from "./check.ts";
import { checkPrivateFile } from "../../../core/private-files.ts";
import { type CheckpointResult, Checkpointer } from "./checkpointer.ts";
import { sqlOf } from "./connection.ts";
import { SqliteCredentials } from "./credentials.ts";
import { ExportThreads } from "./export-thread.ts";
import { GroupCommit } from "./group-commit.ts";
import { SqliteFinance } from "./finance.ts";
import { SqliteKeys, SqliteOrgs } from "./keys.ts";
import { DESK_MIGRATIONS } from "./migrations.ts";
import { SqliteMoney } from "./money.ts";
import { SqliteRecords } from "./records.ts";
import { SqliteSandbox } from "./sandbox.ts";

export type SqliteDeskLedgerOptions = {
  /**
   * NORMAL (the desk's default, in WAL) is atomic and consistent after a process crash; a power
   * loss may undo the last commits, all of a transaction or none of it. FULL survives power loss
   * at about a third of the throughput.
   */
  synchronous?: "FULL" | "NORMAL";
  busyTimeoutMs?: number;
  /** Checkpoint the WAL from a worker thread every this many milliseconds (checkpointer.ts). */
  backgroundCheckpointMs?: number;
  /** How long an export waits for a thread before EXPORTS_BUSY (export-thread.ts EXPORT_PLACE_WAIT_MS). */
  exportPlaceWaitMs?: number;
};

export class SqliteDeskLedger implements DeskLedger {
  readonly money: SqliteMoney;
  readonly orgs: SqliteOrgs;
  readonly keys: SqliteKeys;
  readonly catalog: SqliteCatalog;
  readonly records: SqliteRecords;
  readonly sandbox: SqliteSandbox;
  readonly finance: SqliteFinance;
  readonly alerts: SqliteAlerts;
  readonly credentials: SqliteCredentials;
  readonly check: SqliteCheck;
  readonly #db: Database;
  readonly #commit: GroupCommit;
  readonly #checkpointer: Checkpointer | null;
  readonly #exports: ExportThreads | null;
  #open = true;

  /** Opens (creating when missing) the ledger at `path` (":memory:" for tests), migrated to the newest schema. */
  constructor(path: string, options: SqliteDeskLedgerOptions = {}) {
    const busyTimeoutMs = options.busyTimeoutMs ?? 10_000;
    this.#db = openLedger(path, { migrations: DESK_MIGRATIONS, synchronous: options.synchronous ?? "NORMAL", busyTimeoutMs });
    const sql = sqlOf(this.#db);
    // The file just opened (openLedger checked it is private and still at its name).
    const identity = path === ":memory:" ? null : checkPrivateFile(path);
    this.#exports = identity === null ? null : new ExportThreads({ path, identity, busyTimeoutMs }, options.exportPlaceWaitMs);
    this.#commit = new GroupCommit(sql);
    this.alerts = new SqliteAlerts(sql);
    this.money = new SqliteMoney(sql, this.#commit, this.alerts);
    this.orgs = new SqliteOrgs(sql);
    this.keys = new SqliteKeys(sql);
    this.catalog = new SqliteCatalog(sql);
    this.records = new SqliteRecords(sql, this.#exports);
    this.sandbox = new SqliteSandbox(sql, this.orgs, this.keys);
    this.finance = new SqliteFinance(sql);
    this.credentials = new SqliteCredentials(sql);
    this.check = new SqliteCheck(sql);
    this.#checkpointer =
      options.backgroundCheckpointMs !== undefined && path !== ":memory:" ? new Checkpointer(this.#db, path, options.backgroundCheckpointMs) : null;
  }

  /** Runs a checkpoint on the checkpointing thread now; null without one (or once it stopped). */
  checkpointNow(): Promise<CheckpointResult | null> {
    return this.#checkpointer?.now() ?? Promise.resolve(null);
  }

  /** Stops the checkpointing thread after a last checkpoint. */
  async stopCheckpointer(): Promise<void> {
    await this.#checkpointer?.stop();
  }

  /** One process holds the file and nothing else must be reached: healthy while open. */
  async healthy(): Promise<boolean> {
    return this.#open;
  }

  async close(): Promise<void> {
    this.#open = false;
    this.#exports?.close();
    await this.stopCheckpointer();
    this.#db.close();
  }

  /** The connection itself, for tests that plant faults or read raw rows. */
  testOnlyDatabase(): Database {
    return this.#db;
  }

  /** The export threads, for tests of the back-pressure (null for a ledger in memory). */
  testOnlyExportThreads(): ExportThreads | null {
    return this.#exports;
  }

  /** Runs `op` in the group commit the money path uses (tests of the batching itself). */
  testOnlyGroupCommit<T>(op: () => T): Promise<T> {
    return this.#commit.run(op);
  }
}
