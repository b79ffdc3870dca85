// A ledger written by the version before a receipted call's audit entry was read out of its
// receipt (SQLite migration 12, PostgreSQL migration 8) answers GET /admin/audit exactly as it
// did, at every filter and limit: the audit rows its receipts derive are deleted, those that say
// anything else are kept and answered as they are (and desk check names one that disagrees with
// its receipt in more than an earlier stamp). The audit log still refuses UPDATE, DELETE and
// TRUNCATE afterwards.
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { SQL } from "bun";
import { PostgresCheck } from "../../src/adapters/postgres/check.ts";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { Db } from "../../src/adapters/postgres/db.ts";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { migrate } from "../../src/adapters/postgres/migrate.ts";
import { PostgresRecords } from "../../src/adapters/postgres/records.ts";
import { type AuditRow as PostgresAuditRow, auditOf as postgresAuditOf } from "../../src/adapters/postgres/rows.ts";
import { POSTGRES_MIGRATIONS } from "../../src/adapters/postgres/schema.ts";
import { schemaVersion } from "../../src/adapters/sqlite/database.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { DESK_MIGRATIONS } from "../../src/adapters/sqlite/desk/migrations.ts";
import { type AuditRow, auditOf } from "../../src/adapters/sqlite/desk/rows.ts";
import { checkLedger } from "../../src/core/desk/check.ts";
import type { AuditEntry, AuditFilter } from "../../src/core/desk/records.ts";
import { type AuditMix, auditFilters, writeAuditMix } from "../helpers/ledger-contract.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { tempDir } from "../helpers/tmp.ts";

const pg = usePostgres();

/**
 * The audit row the previous version wrote for each call, in the call's transaction order: a
 * receipted call's too. Two of them say other than their receipt: the first charge stamped a
 * millisecond before its receipt was issued (the previous version took the call's time, the
 * receipt its signing time), and the first refund with a margin its receipt does not give.
 */
function previousRow(entry: AuditEntry, mix: { stamped?: string; wrong?: string }): AuditEntry {
  if (entry.receiptId === null) return entry;
  if (mix.stamped === undefined && entry.outcome === "charged") {
    mix.stamped = entry.receiptId;
    return { ...entry, at: entry.at - 1 };
  }
  if (mix.wrong === undefined && entry.outcome === "refunded_upstream_error") {
    mix.wrong = entry.receiptId;
    return { ...entry, marginMc: 7 };
  }
  return entry;
}

const AUDIT_COLUMNS = "at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id";

/** The previous version's audit query (one table, id order), as its RecordStore sent it. */
function previousSqliteAnswer(db: Database, f: AuditFilter): AuditEntry[] {
  const given = [
    ["org_id = $org_id", "$org_id", f.orgId],
    ["key_id = $key_id", "$key_id", f.keyId],
    ["at >= $at", "$at", f.sinceMs],
  ].filter(([, , v]) => v !== null) as [string, string, string | number][];
  const where = given.length === 0 ? "" : `WHERE ${given.map(([c]) => c).join(" AND ")}`;
  const params = Object.fromEntries([...given.map(([, name, v]) => [name, v]), ["$limit", f.limit]]);
  return (db.query(`SELECT ${AUDIT_COLUMNS} FROM audit ${where} ORDER BY id LIMIT $limit`).all(params) as AuditRow[]).map(auditOf);
}

async function previousPostgresAnswer(sql: SQL, f: AuditFilter): Promise<AuditEntry[]> {
  const given = [
    ["org_id = $N", f.orgId],
    ["key_id = $N", f.keyId],
    ["at >= $N::bigint", f.sinceMs === null ? null : BigInt(f.sinceMs)],
  ].filter(([, v]) => v !== null) as [string, string | bigint][];
  const where = given.length === 0 ? "" : `WHERE ${given.map(([c], i) => c.replace("$N", `$${i + 1}`)).join(" AND ")}`;
  const rows = (await sql.unsafe(`SELECT ${AUDIT_COLUMNS} FROM audit ${where} ORDER BY id LIMIT $${given.length + 1}::integer`, [
    ...given.map(([, v]) => v),
    f.limit,
  ])) as PostgresAuditRow[];
  return rows.map(postgresAuditOf);
}

/** The problem desk check names for the row whose margin its receipt does not give (and none for the earlier stamp). */
const wrongMargin = (receiptId: string) => expect.stringMatching(new RegExp(`audit row of receipt ${receiptId}: margin_mc 7, its receipt derives 0`));

describe("SQLite: a ledger of the previous version (11 migrations)", () => {
  /** Writes the mix through the ledger and, as the previous version did, an audit row for every receipted call; leaves the file at 11. */
  async function previousLedger(path: string, tie = false): Promise<{ mix: AuditMix; stamped?: string; wrong?: string }> {
    const ledger = new SqliteDeskLedger(path);
    const kept: { stamped?: string; wrong?: string } = {};
    try {
      const db = ledger.testOnlyDatabase();
      // The schema of migration 11 had no trigger refusing a receipted call's row.
      db.run("DROP TRIGGER audit_no_receipt_rows");
      const insert = db.query(`INSERT INTO audit (${AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
      // Without a tie both versions answer alike: the previous one answered one millisecond in
      // write order, this one the receipt's entry first (the tie test below).
      const mix = await writeAuditMix(ledger, {
        tie,
        after: async (entry) => {
          if (entry.receiptId === null) return;
          const e = previousRow(entry, kept);
          insert.run(e.at, e.orgId, e.keyId, e.tool, e.outcome, e.httpStatus, e.priceMc, e.upstreamCostMc, e.marginMc, e.receiptId);
        },
      });
      return { mix, ...kept };
    } finally {
      await ledger.close();
      // The schema of migration 11: 12 adds audit_receipt and the insert trigger (and lifts a trigger inside its transaction).
      const raw = new Database(path);
      raw.run("DROP INDEX audit_receipt");
      raw.run("PRAGMA user_version = 11");
      raw.close();
    }
  }

  test("opens converted: the audit log answers as before at every filter and limit; only rows that differ from their receipt stay", async () => {
    await using dir = tempDir("audit-fold-");
    const path = join(dir.path, "desk.db");
    const { mix, stamped, wrong } = await previousLedger(path);
    const raw = new Database(path);
    const filters: AuditFilter[] = [{ orgId: null, keyId: null, sinceMs: null, limit: 1_000 }, ...auditFilters(mix)];
    const before = filters.map((f) => previousSqliteAnswer(raw, f));
    expect(before[0]).toHaveLength(mix.recorded.length);
    expect((raw.query("SELECT count(*) AS n FROM audit").get() as { n: number }).n).toBe(mix.recorded.length);
    raw.close();

    const ledger = new SqliteDeskLedger(path);
    try {
      const db = ledger.testOnlyDatabase();
      expect(schemaVersion(db)).toBe(DESK_MIGRATIONS.length);
      for (const [i, filter] of filters.entries()) expect({ filter, answer: await ledger.records.audit(filter) }).toEqual({ filter, answer: before[i]! });
      const plain = mix.recorded.filter((e) => e.receiptId === null).length;
      expect((db.query("SELECT count(*) AS n FROM audit WHERE receipt_id IS NULL").get() as { n: number }).n).toBe(plain);
      expect(
        (db.query("SELECT receipt_id FROM audit WHERE receipt_id IS NOT NULL ORDER BY id").all() as { receipt_id: string }[]).map((r) => r.receipt_id),
      ).toEqual([stamped!, wrong!]);
      // Append-only after the migration as before it: the trigger it lifted is back.
      expect(() => db.run("UPDATE audit SET margin_mc = 0")).toThrow(/append-only/);
      expect(() => db.run("DELETE FROM audit")).toThrow(/append-only/);
      expect(() => db.run(`DELETE FROM audit WHERE receipt_id = '${stamped}'`)).toThrow(/append-only/);
      // A row naming a receipt would stand in for the receipt's own entry: none can be added.
      const copy = `INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
        SELECT 1, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id FROM audit WHERE receipt_id = '${stamped}'`;
      expect(() => db.run(copy)).toThrow(/a receipted call is audited by its receipt/);
      expect(() =>
        db.run(
          "INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id) SELECT 1, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, 'rcpt_x' FROM audit LIMIT 1",
        ),
      ).toThrow(/a receipted call is audited by its receipt/);
      expect(() =>
        db.run(
          "INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id) SELECT 1, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, NULL FROM audit LIMIT 1",
        ),
      ).not.toThrow();
      expect((await checkLedger(ledger)).problems).toEqual([wrongMargin(wrong!)]);
    } finally {
      await ledger.close();
    }
  });

  test("a refusal and a charge written in one millisecond: answered in write order before, the receipt's entry first after, nothing else moved", async () => {
    await using dir = tempDir("audit-fold-tie-");
    const path = join(dir.path, "desk.db");
    const { mix, wrong } = await previousLedger(path, true);
    const all: AuditFilter = { orgId: null, keyId: null, sinceMs: null, limit: 1_000 };
    const raw = new Database(path);
    const before = previousSqliteAnswer(raw, all);
    raw.close();
    const tie = mix.tie!;
    expect(before.filter((e) => e.at === tie).map((e) => e.outcome)).toEqual(["refused_args_invalid", "charged"]);

    const ledger = new SqliteDeskLedger(path);
    try {
      const after = await ledger.records.audit(all);
      expect(after.filter((e) => e.at === tie).map((e) => e.outcome)).toEqual(["charged", "refused_args_invalid"]);
      // Every other entry where it was: the answer is the one before with the tied pair swapped.
      const at = before.findIndex((e) => e.at === tie);
      const expected = [...before.slice(0, at), before[at + 1]!, before[at]!, ...before.slice(at + 2)];
      expect(after).toEqual(expected);
      expect((await checkLedger(ledger)).problems).toEqual([wrongMargin(wrong!)]);
    } finally {
      await ledger.close();
    }
  });
});

describe("PostgreSQL: a ledger of the previous version (7 migrations)", () => {
  test("migrates converted: the audit log answers as before at every filter and limit; only rows that differ from their receipt stay", async () => {
    const { url } = await pg.server.createDatabase();
    const kept: { stamped?: string; wrong?: string } = {};
    const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: 4 } });
    let mix: AuditMix;
    try {
      const sql = ledger.testOnlySql();
      // The schema of migration 7 had no trigger refusing a receipted call's row.
      await sql`DROP TRIGGER audit_no_receipt_rows ON audit`;
      await sql`DROP FUNCTION refuse_receipt_audit_row()`;
      mix = await writeAuditMix(ledger, {
        tie: false,
        after: async (entry) => {
          if (entry.receiptId === null) return;
          const e = previousRow(entry, kept);
          await sql.unsafe(`INSERT INTO audit (${AUDIT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, [
            e.at,
            e.orgId,
            e.keyId,
            e.tool,
            e.outcome,
            e.httpStatus,
            e.priceMc,
            e.upstreamCostMc,
            e.marginMc,
            e.receiptId,
          ]);
        },
      });
      // The schema of migration 7: 8 adds audit_receipt and the insert trigger (and lifts a trigger inside its transaction).
      await sql`DROP INDEX audit_receipt`;
      await sql`UPDATE schema_version SET version = 7`;
    } finally {
      await ledger.close();
    }
    const sql = openPool(parseDatabaseUrl(url), { max: 1 });
    try {
      const filters: AuditFilter[] = [{ orgId: null, keyId: null, sinceMs: null, limit: 1_000 }, ...auditFilters(mix)];
      const before: AuditEntry[][] = [];
      for (const f of filters) before.push(await previousPostgresAnswer(sql, f));
      expect(before[0]).toHaveLength(mix.recorded.length);

      expect(await migrate(sql)).toEqual({ from: 7, to: POSTGRES_MIGRATIONS.length });
      const db = new Db(sql, () => {});
      const records = new PostgresRecords(db, null);
      for (const [i, filter] of filters.entries()) expect({ filter, answer: await records.audit(filter) }).toEqual({ filter, answer: before[i]! });
      const plain = mix.recorded.filter((e) => e.receiptId === null).length;
      expect(await sql`SELECT count(*)::int AS n FROM audit WHERE receipt_id IS NULL`).toEqual([{ n: plain }] as never);
      expect((await sql`SELECT receipt_id FROM audit WHERE receipt_id IS NOT NULL ORDER BY id`).map((r: { receipt_id: string }) => r.receipt_id)).toEqual([
        kept.stamped!,
        kept.wrong!,
      ]);
      // Append-only after the migration as before it: the trigger it lifted is back.
      for (const change of [
        "UPDATE audit SET margin_mc = 0",
        "DELETE FROM audit",
        `DELETE FROM audit WHERE receipt_id = '${kept.stamped}'`,
        "TRUNCATE audit",
      ]) {
        expect(
          await sql.unsafe(change).then(
            () => "changed",
            (e: Error) => e.message,
          ),
        ).toBe("audit is append-only");
      }
      // A row naming a receipt would stand in for the receipt's own entry: none can be added.
      expect(
        await sql
          .unsafe(
            `INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
             SELECT 1, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id FROM audit WHERE receipt_id = '${kept.stamped}'`,
          )
          .then(
            () => "inserted",
            (e: Error) => e.message,
          ),
      ).toBe("a receipted call is audited by its receipt");
      expect((await checkLedger({ check: new PostgresCheck(db), records })).problems).toEqual([wrongMargin(kept.wrong!)]);
    } finally {
      await sql.close();
    }
  });
});
