// What several nodes share beside the money: the catalog's version (so each node learns within
// a second that upstreams, tools or prices changed and reloads them) and set-once meta values
// (the sealing key's fingerprint, the admin token's hash).
import type { SQL } from "bun";
import { toSafe } from "./money.ts";

/** The catalog version the triggers on upstreams and tools move. */
export async function readCatalogVersion(sql: SQL): Promise<number> {
  const [row] = await sql`SELECT version FROM catalog_version WHERE id = 1`;
  return toSafe(row.version);
}

/**
 * The catalog version as a node sees it: read from the database at most once per `maxAgeMs`
 * (by `clock`), one read at a time however many calls ask. A change made through any node is
 * seen by every node within `maxAgeMs` plus one read.
 */
export class CatalogVersionWatch {
  private known: number | null = null;
  private readAt = Number.NEGATIVE_INFINITY;
  private inFlight: Promise<number> | null = null;

  constructor(
    private readonly read: () => Promise<number>,
    private readonly clock: () => number,
    private readonly maxAgeMs = 1000,
  ) {}

  current(): Promise<number> {
    if (this.known !== null && this.clock() - this.readAt < this.maxAgeMs) return Promise.resolve(this.known);
    this.inFlight ??= (async () => {
      const startedAt = this.clock();
      try {
        const version = await this.read();
        this.known = version;
        this.readAt = startedAt;
        return version;
      } finally {
        this.inFlight = null;
      }
    })();
    return this.inFlight;
  }
}

/**
 * Stores `value` under `name` unless a value is there already, and returns the stored one: the
 * first node to start sets it, every later node compares with it (a sealing key that differs
 * means the node cannot open what another node sealed).
 */
export async function claimMeta(sql: SQL, name: string, value: string): Promise<string> {
  const [row] = await sql`
    WITH ins AS (
      INSERT INTO meta (name, value) VALUES (${name}, ${value}) ON CONFLICT (name) DO NOTHING RETURNING value
    )
    SELECT value FROM ins UNION ALL SELECT value FROM meta WHERE name = ${name} LIMIT 1`;
  if (row !== undefined) return row.value as string;
  // Another node's insert committed while this statement waited for it: this statement's
  // snapshot predates that row, so it is read in a statement of its own.
  const stored = await getMeta(sql, name);
  if (stored === null) throw new Error(`meta ${name} was neither stored nor found`);
  return stored;
}

export async function getMeta(sql: SQL, name: string): Promise<string | null> {
  const [row] = await sql`SELECT value FROM meta WHERE name = ${name}`;
  return (row?.value as string | undefined) ?? null;
}
