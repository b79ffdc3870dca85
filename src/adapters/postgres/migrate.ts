// Brings a database's schema to the newest version this binary knows, once, however many nodes
// start at the same moment: the whole migration is one transaction that first takes a
// transaction-scoped advisory lock, so the other nodes wait for it, then find the work done.
// A schema newer than this binary knows is refused, so an old node never writes into it.
import type { SQL } from "bun";
import { SCHEMA } from "./connection.ts";
import { type Migration, POSTGRES_MIGRATIONS } from "./schema.ts";

/** The advisory lock key of the desk's migrations: "ask-only" in ASCII, as a bigint. */
export const MIGRATION_LOCK = 0x61736b2d6f6e6c79n;

export class SchemaTooNew extends Error {
  override name = "SchemaTooNew";
  readonly hint = "use a newer ask-only on this database";
  constructor(
    readonly found: number,
    readonly known: number,
  ) {
    super(`the database schema is version ${found}, newer than this binary knows (${known})`);
  }
}

export type MigrationResult = { from: number; to: number };

/** Runs the migrations not yet applied; resolves with the versions before and after. */
export async function migrate(sql: SQL, migrations: readonly Migration[] = POSTGRES_MIGRATIONS): Promise<MigrationResult> {
  const known = migrations.length;
  return sql.begin(async (tx) => {
    // The nodes that wait here wait for one migration, not for a busy statement.
    await tx`SET LOCAL lock_timeout = '60s'`;
    await tx`SET LOCAL statement_timeout = '120s'`;
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx.unsafe(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    await tx.unsafe(
      `CREATE TABLE IF NOT EXISTS ${SCHEMA}.schema_version (
         id integer PRIMARY KEY CHECK (id = 1),
         version integer NOT NULL CHECK (version >= 0),
         migrated_at timestamptz NOT NULL
       )`,
    );
    const [row] = await tx.unsafe(`SELECT version FROM ${SCHEMA}.schema_version WHERE id = 1`);
    const from = (row?.version as number | undefined) ?? 0;
    if (from > known) throw new SchemaTooNew(from, known);
    for (let version = from + 1; version <= known; version++) {
      await tx.unsafe(`SET LOCAL search_path = ${SCHEMA}`);
      const migration = migrations[version - 1]!;
      await tx.unsafe(migration.sql);
      await migration.convert?.(tx);
    }
    if (known > from) {
      await tx.unsafe(
        `INSERT INTO ${SCHEMA}.schema_version (id, version, migrated_at) VALUES (1, $1, clock_timestamp())
         ON CONFLICT (id) DO UPDATE SET version = excluded.version, migrated_at = excluded.migrated_at`,
        [known],
      );
    }
    return { from, to: Math.max(from, known) };
  });
}

/** The schema version of the database (0 before the first migration). */
export async function schemaVersion(sql: SQL): Promise<number> {
  const [row] = await sql`SELECT to_regclass(${`${SCHEMA}.schema_version`}) IS NOT NULL AS present`;
  if (!row.present) return 0;
  const [v] = await sql.unsafe(`SELECT version FROM ${SCHEMA}.schema_version WHERE id = 1`);
  return (v?.version as number | undefined) ?? 0;
}
