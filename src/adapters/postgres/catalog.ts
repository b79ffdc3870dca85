// Upstreams and their tools in the PostgreSQL desk ledger. Registration stores an upstream with
// the tools it lists in one transaction; a refresh replaces the list and keeps every price. The
// catalog's stamp is catalog_version, which a trigger moves in the transaction of every
// statement that changes an upstream, a tool or a price, whichever node runs it: each node reads
// it on a timer and reloads its in-memory catalog when it moved.
import type { SQL } from "bun";
import { type CatalogStore, LedgerConflict } from "../../core/desk/ports.ts";
import type { NewUpstream, ToolListing, ToolRecord, UpstreamRecord } from "../../core/desk/records.ts";
import type { Db } from "./db.ts";
import { classifyFailure, violatedConstraint } from "./errors.ts";
import { toSafe } from "./money.ts";
import { writeFields } from "./credentials.ts";
import { TOOL_COLUMNS, type ToolRow, toolOf, UPSTREAM_COLUMNS, type UpstreamRow, upstreamOf } from "./rows.ts";

/** The catalog version the triggers on upstreams and tools move. */
export async function readCatalogVersion(sql: SQL): Promise<number> {
  const [row] = await sql`SELECT version FROM catalog_version WHERE id = 1`;
  return toSafe(row.version);
}

async function writeTools(tx: SQL, upstream: string, tools: readonly ToolListing[]): Promise<void> {
  await tx`UPDATE tools SET active = false WHERE upstream = ${upstream}`;
  for (const t of tools) {
    const operation = t.operation === null ? null : JSON.stringify(t.operation);
    await tx`
      INSERT INTO tools (name, upstream, upstream_tool, description, input_schema, listing, operation, active)
      VALUES (${t.name}, ${upstream}, ${t.upstreamTool}, ${t.description}, ${JSON.stringify(t.inputSchema)}, ${JSON.stringify(t.listing)}, ${operation}, true)
      ON CONFLICT (name) DO UPDATE SET upstream_tool = excluded.upstream_tool, description = excluded.description,
        input_schema = excluded.input_schema, listing = excluded.listing, operation = excluded.operation, active = true
        WHERE tools.upstream = excluded.upstream`;
  }
}

export class PostgresCatalog implements CatalogStore {
  constructor(private readonly db: Db) {}

  stamp(): Promise<number> {
    return this.db.run(readCatalogVersion);
  }

  async upstream(name: string): Promise<UpstreamRecord | null> {
    const [row] = (await this.db.run((sql) => sql.unsafe(`SELECT ${UPSTREAM_COLUMNS} FROM upstreams WHERE name = $1`, [name]))) as UpstreamRow[];
    return row === undefined ? null : upstreamOf(row);
  }

  async upstreams(): Promise<UpstreamRecord[]> {
    return ((await this.db.run((sql) => sql.unsafe(`SELECT ${UPSTREAM_COLUMNS} FROM upstreams ORDER BY name`))) as UpstreamRow[]).map(upstreamOf);
  }

  async addUpstream(upstream: NewUpstream, tools: readonly ToolListing[]): Promise<void> {
    try {
      const doc = upstream.document;
      await this.db.tx(async (tx) => {
        await tx`
          INSERT INTO upstreams (name, url, sealed_headers, header_names, created_at, refreshed_at, kind, auth, openapi_url, openapi)
          VALUES (${upstream.name}, ${upstream.url}, NULL, '{}'::text[], ${BigInt(upstream.now)}::bigint, ${BigInt(upstream.now)}::bigint,
                  ${upstream.kind}, ${upstream.auth === null ? null : JSON.stringify(upstream.auth)},
                  ${doc !== null && "url" in doc ? doc.url : null}, ${doc !== null && "inline" in doc ? JSON.stringify(doc.inline) : null})`;
        await writeTools(tx, upstream.name, tools);
        // The sealed fields may hold a token the registration already got: stored with it.
        await writeFields(tx, upstream.name, upstream.sealedFields);
      });
    } catch (err) {
      if (classifyFailure(err) === "constraint" && violatedConstraint(err) === "upstreams_pkey") throw new LedgerConflict("EXISTS");
      throw err;
    }
  }

  async storedDocument(upstream: string): Promise<Record<string, unknown> | null> {
    const [row] = await this.db.run((sql) => sql`SELECT openapi FROM upstreams WHERE name = ${upstream}`);
    return row?.openapi == null ? null : (JSON.parse(row.openapi) as Record<string, unknown>);
  }

  async refreshTools(upstream: string, tools: readonly ToolListing[], now: number): Promise<void> {
    await this.db.tx(async (tx) => {
      const rows = await tx`UPDATE upstreams SET refreshed_at = ${BigInt(now)}::bigint WHERE name = ${upstream} RETURNING name`;
      if (rows.length !== 1) throw new LedgerConflict("MISSING");
      await writeTools(tx, upstream, tools);
    });
  }

  async tool(name: string): Promise<ToolRecord | null> {
    const [row] = (await this.db.run((sql) => sql.unsafe(`SELECT ${TOOL_COLUMNS} FROM tools WHERE name = $1`, [name]))) as ToolRow[];
    return row === undefined ? null : toolOf(row);
  }

  async tools(): Promise<ToolRecord[]> {
    return ((await this.db.run((sql) => sql.unsafe(`SELECT ${TOOL_COLUMNS} FROM tools ORDER BY name`))) as ToolRow[]).map(toolOf);
  }

  async setPrice(name: string, priceMc: number, upstreamCostMc: number): Promise<boolean> {
    const rows = await this.db.run(
      (sql) =>
        sql`UPDATE tools SET price_mc = ${BigInt(priceMc)}::bigint, upstream_cost_mc = ${BigInt(upstreamCostMc)}::bigint WHERE name = ${name} RETURNING name`,
    );
    return rows.length === 1;
  }
}
