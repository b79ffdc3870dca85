// A migrated PostgreSQL desk ledger for a test, with rows written the way the tests need them
// (orgs, keys, nodes) and a receipt maker that signs for real.
import type { SQL } from "bun";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { migrate } from "../../src/adapters/postgres/migrate.ts";
import { receiptMakerFor } from "../../src/core/desk/receipt-maker.ts";
import type { Reset } from "../../src/core/desk/period.ts";
import type { ReceiptMaker } from "../../src/core/desk/ports.ts";
import { type Envelope, generateSigningKey, type Jwks, jwksOf, loadSigner } from "../../src/core/receipt/index.ts";
import type { PostgresServer } from "./postgres.ts";

export type TestLedger = {
  url: string;
  /** Opens another pool on the same database (another "node"); closed with the ledger. */
  pool(max?: number): SQL;
  sql: SQL;
  close(): Promise<void>;
} & AsyncDisposable;

/** A new database on `server`, migrated, with a pool on it. */
export async function freshLedger(server: PostgresServer, max = 10): Promise<TestLedger> {
  const { url } = await server.createDatabase();
  const pools: SQL[] = [];
  const pool = (m = 10) => {
    const p = openPool(parseDatabaseUrl(url), { max: m });
    pools.push(p);
    return p;
  };
  const sql = pool(max);
  await migrate(sql);
  const close = async () => {
    await Promise.all(pools.map((p) => p.close()));
  };
  return { url, pool, sql, close, [Symbol.asyncDispose]: close };
}

let n = 0;

export async function addKey(
  sql: SQL,
  k: { budgetMc: number; reset?: Reset; period?: string; orgId?: string; expiresAt?: number | null } = { budgetMc: 0 },
): Promise<{ id: string; orgId: string }> {
  n += 1;
  const orgId = k.orgId ?? `org_${n}`;
  const id = `key_${n}`;
  await sql`INSERT INTO orgs (id, name, created_at) VALUES (${orgId}, 'acme', 0) ON CONFLICT DO NOTHING`;
  await sql`
    INSERT INTO keys (id, org_id, name, lookup, secret_sha256, budget_mc, reset, period, allow, prices, expires_at, created_at)
    VALUES (${id}, ${orgId}, 'agent', ${`lk_${n}`}, ${Buffer.alloc(32)}, ${BigInt(k.budgetMc)}::bigint, ${k.reset ?? "none"},
            ${k.period ?? "none"}, ${["tool"]}::text[], '{}'::jsonb, ${k.expiresAt ?? null}::bigint, 0)`;
  return { id, orgId };
}

/** A node row whose lease runs `leaseMs` from the database's now (negative: already run out). */
export async function addNode(sql: SQL, id: string, leaseMs = 60_000): Promise<{ id: string; epoch: number }> {
  await sql`
    INSERT INTO nodes (id, epoch, started_at, renewed_at, expires_at)
    VALUES (${id}, 1, clock_timestamp(), clock_timestamp(), clock_timestamp() + ${leaseMs}::integer * interval '1 millisecond')`;
  return { id, epoch: 1 };
}

/** Ends a node's lease now, as if it had stopped renewing long enough ago. */
export async function expireNode(sql: SQL, id: string): Promise<void> {
  await sql`UPDATE nodes SET expires_at = clock_timestamp() - interval '1 second' WHERE id = ${id}`;
}

/** A receipt maker signing with a fresh key; `envelopes` collects what it signed. */
export function signingMaker(): { make: ReceiptMaker; jwks: Jwks; envelopes: Envelope[] } {
  const key = generateSigningKey();
  const envelopes: Envelope[] = [];
  return { make: receiptMakerFor(loadSigner(key.privatePem), (e) => envelopes.push(e)), jwks: jwksOf(key.publicJwk), envelopes };
}
