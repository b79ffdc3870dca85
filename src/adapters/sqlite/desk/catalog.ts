// Upstreams and their tools in the SQLite desk ledger: registration stores an upstream with the
// tools it lists and its credential's sealed fields in one transaction; a refresh replaces the
// list and keeps every price.
import { type CatalogStore, LedgerConflict } from "../../../core/desk/ports.ts";
import type { NewUpstream, ToolListing, ToolRecord, UpstreamRecord } from "../../../core/desk/records.ts";
import { isConstraint, type Sql } from "./connection.ts";
import { writeFields } from "./credentials.ts";
import { type ToolRow, toolOf, UPSTREAM_COLUMNS, type UpstreamRow, upstreamOf } from "./rows.ts";

export class SqliteCatalog implements CatalogStore {
  /** Moved by every catalog write: one desk process holds the file (its lock), so none is missed. */
  private writes = 0;

  constructor(private readonly sql: Sql) {}

  async stamp(): Promise<number> {
    return this.writes;
  }

  async upstream(name: string): Promise<UpstreamRecord | null> {
    const row = this.sql.db.query(`SELECT ${UPSTREAM_COLUMNS} FROM upstreams WHERE name = ?`).get(name) as UpstreamRow | null;
    return row === null ? null : upstreamOf(row);
  }

  async upstreams(): Promise<UpstreamRecord[]> {
    return (this.sql.db.query(`SELECT ${UPSTREAM_COLUMNS} FROM upstreams ORDER BY name`).all() as UpstreamRow[]).map(upstreamOf);
  }

  async addUpstream(upstream: NewUpstream, tools: readonly ToolListing[]): Promise<void> {
    const doc = upstream.document;
    // Durable: the sealed fields may hold a token the registration already got (a rotated
    // refresh token must never be lost).
    this.sql.durably(() => {
      try {
        this.sql.db
          .query(
            `INSERT INTO upstreams (name, url, sealed_headers, header_names, created_at, refreshed_at, kind, auth, openapi_url, openapi)
             VALUES (?, ?, NULL, '[]', ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            upstream.name,
            upstream.url,
            upstream.now,
            upstream.now,
            upstream.kind,
            upstream.auth === null ? null : JSON.stringify(upstream.auth),
            doc !== null && "url" in doc ? doc.url : null,
            doc !== null && "inline" in doc ? JSON.stringify(doc.inline) : null,
          );
      } catch (err) {
        if (isConstraint(err)) throw new LedgerConflict("EXISTS");
        throw err;
      }
      this.writeTools(upstream.name, tools);
      writeFields(this.sql, upstream.name, upstream.sealedFields);
    });
    this.writes++;
  }

  async storedDocument(upstream: string): Promise<Record<string, unknown> | null> {
    const row = this.sql.db.query("SELECT openapi FROM upstreams WHERE name = ?").get(upstream) as { openapi: string | null } | null;
    return row?.openapi == null ? null : (JSON.parse(row.openapi) as Record<string, unknown>);
  }

  async refreshTools(upstream: string, tools: readonly ToolListing[], now: number): Promise<void> {
    this.sql.immediate(() => {
      if (this.sql.db.query("UPDATE upstreams SET refreshed_at = ? WHERE name = ?").run(now, upstream).changes !== 1) {
        throw new LedgerConflict("MISSING");
      }
      this.writeTools(upstream, tools);
    });
    this.writes++;
  }

  private writeTools(upstream: string, tools: readonly ToolListing[]): void {
    this.sql.db.query("UPDATE tools SET active = 0 WHERE upstream = ?").run(upstream);
    const upsert = this.sql.db.query(
      `INSERT INTO tools (name, upstream, upstream_tool, description, input_schema, listing, operation, active) VALUES (?, ?, ?, ?, ?, ?, ?, 1)
       ON CONFLICT (name) DO UPDATE SET upstream_tool = excluded.upstream_tool, description = excluded.description,
         input_schema = excluded.input_schema, listing = excluded.listing, operation = excluded.operation, active = 1
         WHERE tools.upstream = excluded.upstream`,
    );
    for (const t of tools) {
      const operation = t.operation === null ? null : JSON.stringify(t.operation);
      upsert.run(t.name, upstream, t.upstreamTool, t.description, JSON.stringify(t.inputSchema), JSON.stringify(t.listing), operation);
    }
  }

  async tool(name: string): Promise<ToolRecord | null> {
    const row = this.sql.db.query("SELECT * FROM tools WHERE name = ?").get(name) as ToolRow | null;
    return row === null ? null : toolOf(row);
  }

  async tools(): Promise<ToolRecord[]> {
    return (this.sql.db.query("SELECT * FROM tools ORDER BY name").all() as ToolRow[]).map(toolOf);
  }

  async setPrice(name: string, priceMc: number, upstreamCostMc: number): Promise<boolean> {
    this.writes++;
    return this.sql.db.query("UPDATE tools SET price_mc = ?, upstream_cost_mc = ? WHERE name = ?").run(priceMc, upstreamCostMc, name).changes === 1;
  }
}
