// The sandbox's settings and its keys in PostgreSQL. The per-network and all-networks daily
// limits are conditional upserts inside the transaction that creates the org and the key: at the
// limit the upsert changes no row and the transaction is rolled back, so parallel requests on
// any number of nodes never get more than the limit.
import type { SQL } from "bun";
import type { SandboxStore } from "../../core/desk/ports.ts";
import type { SandboxGrant, SandboxSettings } from "../../core/desk/records.ts";
import type { Db } from "./db.ts";
import { insertKey, insertOrg } from "./keys.ts";
import { toSafe } from "./money.ts";

/** The sandbox_grants row that counts every network's keys of a day together. */
const ALL_NETWORKS = "*";

class LimitReached extends Error {}

/** One more key for `network` on `day` while fewer than `limit`; false at the limit. */
async function count(tx: SQL, day: string, network: string, limit: number): Promise<boolean> {
  const rows = await tx`
    INSERT INTO sandbox_grants (day, network, count) VALUES (${day}, ${network}, 1)
    ON CONFLICT (day, network) DO UPDATE SET count = sandbox_grants.count + 1 WHERE sandbox_grants.count < ${limit}::integer
    RETURNING count`;
  return rows.length === 1;
}

export class PostgresSandbox implements SandboxStore {
  constructor(private readonly db: Db) {}

  async settings(): Promise<SandboxSettings | null> {
    const [row] = await this.db.run((sql) => sql`SELECT tools, budget_mc, ttl_s, keys_per_day, updated_at FROM sandbox WHERE id = 1`);
    if (row === undefined) return null;
    return { tools: row.tools, budgetMc: toSafe(row.budget_mc), ttlS: row.ttl_s, keysPerDay: row.keys_per_day, updatedAt: toSafe(row.updated_at) };
  }

  async set(s: SandboxSettings): Promise<void> {
    await this.db.run(
      (sql) => sql`
        INSERT INTO sandbox (id, tools, budget_mc, ttl_s, keys_per_day, updated_at)
        VALUES (1, ${[...s.tools]}::text[], ${BigInt(s.budgetMc)}::bigint, ${s.ttlS}::integer, ${s.keysPerDay}::integer, ${BigInt(s.updatedAt)}::bigint)
        ON CONFLICT (id) DO UPDATE SET tools = excluded.tools, budget_mc = excluded.budget_mc, ttl_s = excluded.ttl_s,
          keys_per_day = excluded.keys_per_day, updated_at = excluded.updated_at`,
    );
  }

  async clear(): Promise<boolean> {
    return (await this.db.run((sql) => sql`DELETE FROM sandbox WHERE id = 1 RETURNING id`)).length === 1;
  }

  /** Grants of earlier days are dropped on the way. */
  async grant(g: SandboxGrant): Promise<boolean> {
    try {
      await this.db.tx(async (tx) => {
        await tx`DELETE FROM sandbox_grants WHERE day < ${g.day}`;
        // Thrown, not returned: the counts are rolled back with the transaction.
        if (!(await count(tx, g.day, g.network, g.limit))) throw new LimitReached();
        if (!(await count(tx, g.day, ALL_NETWORKS, g.dayLimit))) throw new LimitReached();
        await insertOrg(tx, g.org);
        await insertKey(tx, g.key);
      });
      return true;
    } catch (err) {
      if (err instanceof LimitReached) return false;
      throw err;
    }
  }

  async grants(day: string, network: string): Promise<number> {
    const [row] = await this.db.run((sql) => sql`SELECT count FROM sandbox_grants WHERE day = ${day} AND network = ${network}`);
    return (row?.count as number | undefined) ?? 0;
  }
}
