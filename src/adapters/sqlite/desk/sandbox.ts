// The sandbox's SQL: its settings, and handing out one key under the per-network daily limit.
// The limit is one conditional upsert inside the transaction that creates the org and the key,
// so parallel requests (or processes) from one network never get more than the limit.
import type { DeskLedger, NewKey } from "./ledger.ts";

export type SandboxSettings = { tools: string[]; budgetMc: number; ttlS: number; keysPerDay: number; updatedAt: number };

type SandboxRow = { tools: string; budget_mc: number; ttl_s: number; keys_per_day: number; updated_at: number };

/** The sandbox_grants row that counts every network's keys of a day together. */
const ALL_NETWORKS = "*";

export function getSandbox(ledger: DeskLedger): SandboxSettings | null {
  const row = ledger.db.query("SELECT tools, budget_mc, ttl_s, keys_per_day, updated_at FROM sandbox WHERE id = 1").get() as SandboxRow | null;
  if (row === null) return null;
  return { tools: JSON.parse(row.tools) as string[], budgetMc: row.budget_mc, ttlS: row.ttl_s, keysPerDay: row.keys_per_day, updatedAt: row.updated_at };
}

/** Turns the sandbox on, or changes it; keys already handed out keep what they were given. */
export function setSandbox(ledger: DeskLedger, s: SandboxSettings): void {
  ledger.db
    .query(
      `INSERT INTO sandbox (id, tools, budget_mc, ttl_s, keys_per_day, updated_at) VALUES (1, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET tools = excluded.tools, budget_mc = excluded.budget_mc, ttl_s = excluded.ttl_s,
         keys_per_day = excluded.keys_per_day, updated_at = excluded.updated_at`,
    )
    .run(JSON.stringify(s.tools), s.budgetMc, s.ttlS, s.keysPerDay, s.updatedAt);
}

/** Turns the sandbox off; returns whether it was on. Keys handed out run until they expire. */
export function clearSandbox(ledger: DeskLedger): boolean {
  return ledger.db.query("DELETE FROM sandbox WHERE id = 1").run().changes === 1;
}

export type SandboxGrant = {
  /** UTC day, "2026-11-30". */
  day: string;
  /** "203.0.113.0/24" or "2001:db8:1:2::/64". */
  network: string;
  limit: number;
  /** Keys of `day` across all networks. */
  dayLimit: number;
  org: { id: string; name: string };
  key: NewKey;
};

class LimitReached extends Error {}

/**
 * Creates the org and the key when `network` has had fewer than `limit` keys on `day` and all
 * networks together fewer than `dayLimit`; returns false (and writes nothing) otherwise. Grants
 * of earlier days are dropped on the way.
 */
export function grantSandboxKey(ledger: DeskLedger, g: SandboxGrant): boolean {
  const db = ledger.db;
  // A count moves only while below its limit: at the limit the upsert changes no row.
  const count = db.query(
    `INSERT INTO sandbox_grants (day, network, count) VALUES (?, ?, 1)
     ON CONFLICT (day, network) DO UPDATE SET count = count + 1 WHERE count < ?`,
  );
  try {
    db.transaction(() => {
      db.query("DELETE FROM sandbox_grants WHERE day < ?").run(g.day);
      if (count.run(g.day, g.network, g.limit).changes !== 1) throw new LimitReached();
      // Thrown, not returned: the network's count above is rolled back with the transaction.
      if (count.run(g.day, ALL_NETWORKS, g.dayLimit).changes !== 1) throw new LimitReached();
      ledger.createOrg(g.org.id, g.org.name, g.key.now);
      ledger.createKey(g.key);
    }).immediate();
    return true;
  } catch (err) {
    if (err instanceof LimitReached) return false;
    throw err;
  }
}

/** Keys counted for `network` on `day` (tests and the operator's view). */
export function sandboxGrants(ledger: DeskLedger, day: string, network: string): number {
  const row = ledger.db.query("SELECT count FROM sandbox_grants WHERE day = ? AND network = ?").get(day, network) as { count: number } | null;
  return row?.count ?? 0;
}
