// The desk ledger on PostgreSQL: one pool, the schema migrated (once, under the advisory lock,
// however many nodes start together), this node's lease, and every store of the ledger port
// (core/desk/ports.ts) built on them. Several desk nodes open it on one database; each takes
// calls only while it holds its lease. Without a node id (`desk check`) it reads and settles
// nothing on any node's behalf.
import type { SQL } from "bun";
import type { DeskLedger, Log } from "../../core/desk/ports.ts";
import { PostgresAlerts } from "./alerts.ts";
import { PostgresCatalog } from "./catalog.ts";
import { PostgresCheck } from "./check.ts";
import { PostgresCredentials } from "./credentials.ts";
import { type DatabaseTarget, openPool, type PoolOptions } from "./connection.ts";
import { Db, DEFAULT_DEADLINE_MS } from "./db.ts";
import { PostgresFinance } from "./finance.ts";
import { PostgresKeys, PostgresOrgs } from "./keys.ts";
import { migrate, type MigrationResult, SchemaTooNew, schemaVersion } from "./migrate.ts";
import { POSTGRES_MIGRATIONS } from "./schema.ts";

/** The database holds no desk ledger of this binary's schema (`desk check` migrates nothing). */
export class SchemaMissing extends Error {
  override name = "SchemaMissing";
  readonly hint = "start a desk on this database first (it creates the schema), or give the right database";
  constructor(readonly found: number) {
    super(found === 0 ? "the database holds no desk ledger" : `the desk ledger's schema is version ${found}, older than this binary's`);
  }
}
import { PostgresMoney } from "./money-store.ts";
import { DEFAULT_LEASE, type LeaseTiming, NodeSession } from "./node.ts";
import { PostgresRecords } from "./records.ts";
import { PostgresSandbox } from "./sandbox.ts";

export type PostgresDeskLedgerOptions = {
  /** This node's id; null opens the ledger without a node (it takes no call and sweeps nothing). */
  nodeId: string | null;
  /** Migrate at open (a node), or only check that the schema is this binary's (`desk check`). Default true. */
  migrate?: boolean;
  lease?: LeaseTiming;
  pool?: PoolOptions;
  /** Every database call's deadline on this side (db.ts). */
  deadlineMs?: number;
  log?: Log;
};

async function expectCurrent(sql: SQL): Promise<MigrationResult> {
  const found = await schemaVersion(sql);
  const known = POSTGRES_MIGRATIONS.length;
  if (found > known) throw new SchemaTooNew(found, known);
  if (found < known) throw new SchemaMissing(found);
  return { from: found, to: found };
}

export class PostgresDeskLedger implements DeskLedger {
  readonly money: PostgresMoney;
  readonly orgs: PostgresOrgs;
  readonly keys: PostgresKeys;
  readonly catalog: PostgresCatalog;
  readonly records: PostgresRecords;
  readonly sandbox: PostgresSandbox;
  readonly finance: PostgresFinance;
  readonly alerts: PostgresAlerts;
  readonly credentials: PostgresCredentials;
  readonly check: PostgresCheck;
  readonly #sql: SQL;
  readonly #db: Db;
  readonly #node: NodeSession | null;
  #open = true;

  private constructor(
    sql: SQL,
    node: NodeSession | null,
    log: Log,
    deadlineMs: number,
    readonly migration: MigrationResult,
  ) {
    this.#sql = sql;
    this.#node = node;
    this.#db = new Db(sql, log, deadlineMs);
    this.money = new PostgresMoney(this.#db, node);
    this.orgs = new PostgresOrgs(this.#db);
    this.keys = new PostgresKeys(this.#db, node);
    this.catalog = new PostgresCatalog(this.#db);
    this.records = new PostgresRecords(this.#db, node);
    this.sandbox = new PostgresSandbox(this.#db);
    this.finance = new PostgresFinance(this.#db);
    this.alerts = new PostgresAlerts(this.#db, node);
    this.credentials = new PostgresCredentials(this.#db);
    this.check = new PostgresCheck(this.#db);
  }

  /**
   * Connects, migrates and registers the node (waiting out the lease of this id's previous run,
   * a process killed moments ago). Any failure closes the pool and propagates: the desk does not
   * start on a database it cannot use.
   */
  static async open(target: DatabaseTarget, options: PostgresDeskLedgerOptions): Promise<PostgresDeskLedger> {
    const log = options.log ?? (() => {});
    const sql = openPool(target, options.pool);
    let node: NodeSession | null = null;
    try {
      const migration = options.migrate === false ? await expectCurrent(sql) : await migrate(sql);
      if (options.nodeId !== null) node = await NodeSession.start(sql, options.nodeId, options.lease ?? DEFAULT_LEASE, log);
      return new PostgresDeskLedger(sql, node, log, options.deadlineMs ?? DEFAULT_DEADLINE_MS, migration);
    } catch (err) {
      await node?.stop();
      await sql.close();
      throw err;
    }
  }

  /** This node's id, or null without one. */
  get nodeId(): string | null {
    return this.#node?.id ?? null;
  }

  /** Reachable now, and (with a node) the lease held. */
  async healthy(): Promise<boolean> {
    if (!this.#open) return false;
    if (this.#node !== null && this.#node.lease() === null) return false;
    try {
      await this.#db.run((sql) => sql`SELECT 1`);
      return true;
    } catch {
      return false;
    }
  }

  /** Ends the lease at once (the other nodes may sweep what is left), then closes the pool. */
  async close(): Promise<void> {
    if (!this.#open) return;
    this.#open = false;
    await this.#node?.stop();
    await this.#sql.close();
  }

  /** The pool itself, for tests that read raw rows or plant faults. */
  testOnlySql(): SQL {
    return this.#sql;
  }
}
