// The sandbox's SQL: its settings, and handing out one key under the per-network daily limit.
// The limit is one conditional upsert inside the transaction that creates the org and the key,
// so parallel requests (or processes) from one network never get more than the limit.
import type { SandboxStore } from "../../../core/desk/ports.ts";
import type { SandboxGrant, SandboxSettings } from "../../../core/desk/records.ts";
import type { Sql } from "./connection.ts";
import type { SqliteKeys, SqliteOrgs } from "./keys.ts";

type SandboxRow = { tools: string; budget_mc: number; ttl_s: number; keys_per_day: number; updated_at: number };

/** The sandbox_grants row that counts every network's keys of a day together. */
const ALL_NETWORKS = "*";

class LimitReached extends Error {}

export class SqliteSandbox implements SandboxStore {
  constructor(
    private readonly sql: Sql,
    private readonly orgs: SqliteOrgs,
    private readonly keys: SqliteKeys,
  ) {}

  async settings(): Promise<SandboxSettings | null> {
    const row = this.sql.db.query("SELECT tools, budget_mc, ttl_s, keys_per_day, updated_at FROM sandbox WHERE id = 1").get() as SandboxRow | null;
    if (row === null) return null;
    return { tools: JSON.parse(row.tools) as string[], budgetMc: row.budget_mc, ttlS: row.ttl_s, keysPerDay: row.keys_per_day, updatedAt: row.updated_at };
  }

  async set(s: SandboxSettings): Promise<void> {
    this.sql.db
      .query(
        `INSERT INTO sandbox (id, tools, budget_mc, ttl_s, keys_per_day, updated_at) VALUES (1, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET tools = excluded.tools, budget_mc = excluded.budget_mc, ttl_s = excluded.ttl_s,
           keys_per_day = excluded.keys_per_day, updated_at = excluded.updated_at`,
      )
      .run(JSON.stringify(s.tools), s.budgetMc, s.ttlS, s.keysPerDay, s.updatedAt);
  }

  async clear(): Promise<boolean> {
    return this.sql.db.query("DELETE FROM sandbox WHERE id = 1").run().changes === 1;
  }

  /** Grants of earlier days are dropped on the way. */
  async grant(g: SandboxGrant): Promise<boolean> {
    const db = this.sql.db;
    // A count moves only while below its limit: at the limit the upsert changes no row.
    const count = db.query(
      `INSERT INTO sandbox_grants (day, network, count) VALUES (?, ?, 1)
       ON CONFLICT (day, network) DO UPDATE SET count = count + 1 WHERE count < ?`,
    );
    try {
      this.sql.immediate(() => {
        db.query("DELETE FROM sandbox_grants WHERE day < ?").run(g.day);
        if (count.run(g.day, g.network, g.limit).changes !== 1) throw new LimitReached();
        // Thrown, not returned: the network's count above is rolled back with the transaction.
        if (count.run(g.day, ALL_NETWORKS, g.dayLimit).changes !== 1) throw new LimitReached();
        this.orgs.createNow(g.org);
        this.keys.createNow(g.key);
      });
      return true;
    } catch (err) {
      if (err instanceof LimitReached) return false;
      throw err;
    }
  }

  async grants(day: string, network: string): Promise<number> {
    const row = this.sql.db.query("SELECT count FROM sandbox_grants WHERE day = ? AND network = ?").get(day, network) as { count: number } | null;
    return row?.count ?? 0;
  }
}
