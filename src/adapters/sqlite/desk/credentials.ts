// Upstream credentials in the SQLite desk ledger: one row per sealed field of an upstream's
// credential (the blobs only: sealing and opening happen in core/upstream/credential-store.ts,
// under a key this file never sees). Every write commits with synchronous = FULL (connection.ts):
// a refresh token the authorization server rotated exists nowhere else, and the desk must never
// present the consumed one again after a power loss, any more than after a crash.
import { type CredentialStores, LedgerConflict } from "../../../core/desk/ports.ts";
import type { AuthSettings } from "../../../core/upstream/auth-config.ts";
import type { CredentialStore } from "../../../core/upstream/credential-store.ts";
import type { Sql } from "./connection.ts";

/** Sets (a string) or deletes (null) fields of one upstream, inside the caller's transaction. */
export function writeFields(sql: Sql, upstream: string, changes: Readonly<Record<string, string | null>>): void {
  const set = sql.db.query(
    "INSERT INTO upstream_credentials (upstream, field, sealed) VALUES (?, ?, ?) ON CONFLICT (upstream, field) DO UPDATE SET sealed = excluded.sealed",
  );
  const drop = sql.db.query("DELETE FROM upstream_credentials WHERE upstream = ? AND field = ?");
  for (const [field, sealed] of Object.entries(changes)) {
    if (sealed === null) drop.run(upstream, field);
    else set.run(upstream, field, sealed);
  }
}

export class SqliteCredentials implements CredentialStores {
  constructor(private readonly sql: Sql) {}

  of(upstream: string): CredentialStore {
    const sql = this.sql;
    return {
      load: async () => {
        const rows = sql.db.query("SELECT field, sealed FROM upstream_credentials WHERE upstream = ?").all(upstream) as { field: string; sealed: string }[];
        return Object.fromEntries(rows.map((r) => [r.field, r.sealed]));
      },
      save: async (changes) => {
        sql.durably(() => writeFields(sql, upstream, changes));
      },
    };
  }

  async replace(upstream: string, settings: AuthSettings | null, sealedFields: Readonly<Record<string, string>>): Promise<void> {
    this.sql.durably(() => {
      const changed = this.sql.db
        .query("UPDATE upstreams SET auth = ?, sealed_headers = NULL, header_names = '[]' WHERE name = ?")
        .run(settings === null ? null : JSON.stringify(settings), upstream).changes;
      if (changed !== 1) throw new LedgerConflict("MISSING");
      this.sql.db.query("DELETE FROM upstream_credentials WHERE upstream = ?").run(upstream);
      writeFields(this.sql, upstream, sealedFields);
    });
  }
}
