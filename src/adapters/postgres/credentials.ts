// Upstream credentials in the PostgreSQL desk ledger: one row per sealed field of an upstream's
// credential (the blobs only: sealing and opening happen in core/upstream/credential-store.ts,
// under a key this file never sees). Each save is one transaction, answered once committed
// (synchronous_commit on: durable), so a refresh token the authorization server rotated is never
// lost once the desk has moved on to use it.
import type { SQL } from "bun";
import { type CredentialStores, LedgerConflict } from "../../core/desk/ports.ts";
import type { AuthSettings } from "../../core/upstream/auth-config.ts";
import type { CredentialStore } from "../../core/upstream/credential-store.ts";
import type { Db } from "./db.ts";

/** Sets (a string) or deletes (null) fields of one upstream, inside the caller's transaction. */
export async function writeFields(tx: SQL, upstream: string, changes: Readonly<Record<string, string | null>>): Promise<void> {
  for (const [field, sealed] of Object.entries(changes)) {
    if (sealed === null) await tx`DELETE FROM upstream_credentials WHERE upstream = ${upstream} AND field = ${field}`;
    else
      await tx`
        INSERT INTO upstream_credentials (upstream, field, sealed) VALUES (${upstream}, ${field}, ${sealed})
        ON CONFLICT (upstream, field) DO UPDATE SET sealed = excluded.sealed`;
  }
}

export class PostgresCredentials implements CredentialStores {
  constructor(private readonly db: Db) {}

  of(upstream: string): CredentialStore {
    const db = this.db;
    return {
      load: async () => {
        const rows = (await db.run((sql) => sql`SELECT field, sealed FROM upstream_credentials WHERE upstream = ${upstream}`)) as {
          field: string;
          sealed: string;
        }[];
        return Object.fromEntries(rows.map((r) => [r.field, r.sealed]));
      },
      save: async (changes) => {
        await db.tx((tx) => writeFields(tx, upstream, changes));
      },
    };
  }

  async replace(upstream: string, settings: AuthSettings | null, sealedFields: Readonly<Record<string, string>>): Promise<void> {
    await this.db.tx(async (tx) => {
      const rows = await tx`
        UPDATE upstreams SET auth = ${settings === null ? null : JSON.stringify(settings)}, sealed_headers = NULL, header_names = '{}'::text[]
         WHERE name = ${upstream} RETURNING name`;
      if (rows.length !== 1) throw new LedgerConflict("MISSING");
      await tx`DELETE FROM upstream_credentials WHERE upstream = ${upstream}`;
      await writeFields(tx, upstream, sealedFields);
    });
  }
}
