// A ledger written by the version before receipts were stored once (SQLite migration 11,
// PostgreSQL migration 6) opens with every old receipt converted: each answers and exports the
// very envelope text it was stored with, byte for byte, and desk check finds the ledger sound. A
// row whose columns say other than what was signed is not converted: the ledger does not open.
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { PostgresCheck } from "../../src/adapters/postgres/check.ts";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { Db } from "../../src/adapters/postgres/db.ts";
import { migrate, schemaVersion as postgresVersion } from "../../src/adapters/postgres/migrate.ts";
import { PostgresRecords } from "../../src/adapters/postgres/records.ts";
import { POSTGRES_MIGRATIONS } from "../../src/adapters/postgres/schema.ts";
import { openLedger, schemaVersion } from "../../src/adapters/sqlite/database.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { DESK_MIGRATIONS } from "../../src/adapters/sqlite/desk/migrations.ts";
import { checkLedger } from "../../src/core/desk/check.ts";
import type { RecordStore } from "../../src/core/desk/ports.ts";
import { type Envelope, generateSigningKey, loadSigner, sha256Hex } from "../../src/core/receipt/index.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { addNode } from "../helpers/postgres-ledger.ts";
import { tempDir } from "../helpers/tmp.ts";

const pg = usePostgres();
const SIGNER = loadSigner(generateSigningKey().privatePem);
const T0 = Date.parse("2026-11-30T10:00:00.000Z");

type OldRow = [string, string, string, number, number, string, string, string, number, string, string, string];

/**
 * Rows as the previous version wrote them (id, org_id, key_id, seq, issued_at, tool, outcome,
 * period, amount_mc, kid, sha256, envelope): one key's chain of refusals, the last one's envelope
 * text spelled in another key order than the signer's (still a valid envelope).
 */
function oldRows(): OldRow[] {
  const rows: OldRow[] = [];
  let prev: string | null = null;
  for (let seq = 1; seq <= 4; seq++) {
    const env: Envelope = SIGNER.sign({
      id: `rcpt_old${seq}`,
      issued_at: new Date(T0 + seq).toISOString(),
      org_id: "org_m",
      key_id: "key_m",
      tool: seq === 2 ? 'up__"\u00e9t\u00e9"' : "up__echo",
      outcome: "refused_budget",
      http_status: 402,
      price_mc: 100,
      amount_mc: 0,
      upstream_cost_mc: 10,
      remaining_mc: 50,
      period: "none",
      params_sha256: "a".repeat(64),
      result_sha256: null,
      seq,
      prev_sha256: prev,
    });
    const sha256 = sha256Hex(Buffer.from(env.payload, "base64url"));
    const text = seq === 4 ? JSON.stringify({ kid: env.kid, receipt: env.receipt, signature: env.signature, payload: env.payload }) : JSON.stringify(env);
    rows.push([env.receipt.id, "org_m", "key_m", seq, T0 + seq, env.receipt.tool, "refused_budget", "none", 0, env.kid, sha256, text]);
    prev = sha256;
  }
  return rows;
}

const OLD_INSERT = `INSERT INTO receipts (id, org_id, key_id, seq, issued_at, tool, outcome, period, amount_mc, kid, sha256, envelope)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`;

async function expectSameEnvelopes(records: RecordStore, rows: OldRow[]): Promise<void> {
  for (const row of rows) expect((await records.receipt(row[0]))!.envelope).toBe(row[11]);
  const exported: string[] = [];
  for await (const page of records.receiptPages({ orgId: null, sinceMs: null }, 3)) exported.push(...page.map((r) => r.envelope));
  expect(exported).toEqual(rows.map((r) => r[11]));
  // and the export's bytes, as GET /admin/receipts sends them (on SQLite, read on its own thread)
  const chunks: Uint8Array[] = [];
  for await (const chunk of records.exportChunks({ orgId: null, sinceMs: null })) chunks.push(chunk);
  expect(Buffer.concat(chunks).toString("utf8")).toBe(rows.map((r) => `${r[11]}\n`).join(""));
}

describe("SQLite: a ledger of the previous version (10 migrations)", () => {
  function oldLedger(dir: string, rows: OldRow[]): string {
    const path = join(dir, "desk.db");
    const db = openLedger(path, { migrations: DESK_MIGRATIONS.slice(0, 10) });
    db.query("INSERT INTO signing_keys (kid, public_jwk, created_at) VALUES (?, ?, ?)").run(SIGNER.kid, JSON.stringify(SIGNER.publicJwk()), T0);
    const insert = db.query(OLD_INSERT.replace(/\$\d+/g, "?"));
    for (const row of rows) insert.run(...row);
    db.close();
    return path;
  }

  test("opens converted: the same envelope text from a lookup and from the export, and desk check finds it sound", async () => {
    await using dir = tempDir("stored-once-");
    const rows = oldRows();
    const ledger = new SqliteDeskLedger(oldLedger(dir.path, rows));
    try {
      expect(schemaVersion(ledger.testOnlyDatabase())).toBe(DESK_MIGRATIONS.length);
      await expectSameEnvelopes(ledger.records, rows);
      // Only the row whose text is not the derived one keeps its text.
      expect(ledger.testOnlyDatabase().query("SELECT id FROM receipts WHERE envelope IS NOT NULL").all()).toEqual([{ id: "rcpt_old4" }]);
      expect((await checkLedger(ledger)).problems).toEqual([]);
    } finally {
      await ledger.close();
    }
  });

  test("a row whose columns differ from its payload is refused, and the ledger is left at the previous version", async () => {
    await using dir = tempDir("stored-once-");
    const rows = oldRows();
    rows[1]![8] = 5; // amount_mc, where the signed receipt says 0
    const path = oldLedger(dir.path, rows);
    expect(() => new SqliteDeskLedger(path)).toThrow(/receipt "rcpt_old2" differs from what was signed/);
    const raw = new Database(path);
    try {
      expect(schemaVersion(raw)).toBe(10);
    } finally {
      raw.close();
    }
  });
});

describe("PostgreSQL: a ledger of the previous version (5 migrations)", () => {
  async function oldDatabase(rows: OldRow[]) {
    const { url } = await pg.server.createDatabase();
    const sql = openPool(parseDatabaseUrl(url), { max: 1 });
    await migrate(sql, POSTGRES_MIGRATIONS.slice(0, 5));
    await addNode(sql, "node-a");
    await sql`INSERT INTO signing_keys (kid, node_id, public_jwk, created_at) VALUES (${SIGNER.kid}, 'node-a', ${JSON.stringify(SIGNER.publicJwk())}, ${T0})`;
    for (const row of rows) await sql.unsafe(OLD_INSERT, row);
    return sql;
  }

  test("migrates converted: the same envelope text from a lookup and from the export, and desk check finds it sound", async () => {
    const rows = oldRows();
    const sql = await oldDatabase(rows);
    try {
      expect(await migrate(sql)).toEqual({ from: 5, to: POSTGRES_MIGRATIONS.length });
      const db = new Db(sql, () => {});
      const records = new PostgresRecords(db, null);
      await expectSameEnvelopes(records, rows);
      expect(await sql`SELECT id FROM receipts WHERE envelope IS NOT NULL`).toEqual([{ id: "rcpt_old4" }] as never);
      expect((await checkLedger({ check: new PostgresCheck(db), records })).problems).toEqual([]);
    } finally {
      await sql.close();
    }
  });

  test("a row whose columns differ from its payload is refused, and the database is left at the previous version", async () => {
    const rows = oldRows();
    rows[1]![5] = "up__other"; // tool, where the signed receipt says another
    const sql = await oldDatabase(rows);
    try {
      expect(
        await migrate(sql).then(
          () => "migrated",
          (e: Error) => e.message,
        ),
      ).toMatch(/receipt "rcpt_old2" differs from what was signed/);
      expect(await postgresVersion(sql)).toBe(5);
    } finally {
      await sql.close();
    }
  });
});
