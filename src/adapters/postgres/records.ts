// Reading what the PostgreSQL desk ledger recorded (receipts, the audit log, held results), every
// node's receipt-signing keys, and the settings the nodes share in meta (the admin token's hash,
// the sealing key's fingerprint), each set once by the first node and read by the others.
import { auditOfReceipt, mergeAudit } from "../../core/desk/audit-log.ts";
import { LedgerUnavailable, type RecordStore } from "../../core/desk/ports.ts";
import { chunksOfPages, EXPORT_PAGE } from "../../core/desk/receipts.ts";
import type { AuditEntry, AuditFilter, HeldResult, ReceiptRecord, SigningKeyRecord } from "../../core/desk/records.ts";
import type { ReceiptJwk } from "../../core/receipt/index.ts";
import type { Db } from "./db.ts";
import { toSafe } from "./money.ts";
import type { NodeSession } from "./node.ts";
import { type AuditRow, auditOf, RECEIPT_COLUMNS, type ReceiptRow, receiptOf, signingKeyOf } from "./rows.ts";
import { listSigningKeys, registerSigningKey } from "./signing-keys.ts";

/** The receipt-signing key in this node's data directory is registered to another node: their data directories were copied. */
export class SigningKeyTaken extends Error {
  override name = "SigningKeyTaken";
  constructor(
    readonly kid: string,
    readonly owner: string,
  ) {
    super(`the receipt-signing key ${kid} is registered to node ${owner}`);
  }
}

const bigOrNull = (n: number | null) => (n === null ? null : BigInt(n));

export class PostgresRecords implements RecordStore {
  constructor(
    private readonly db: Db,
    private readonly node: NodeSession | null,
  ) {}

  async receipt(id: string): Promise<ReceiptRecord | null> {
    const [row] = (await this.db.run((sql) => sql.unsafe(`SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE id = $1`, [id]))) as ReceiptRow[];
    return row === undefined ? null : receiptOf(row);
  }

  async keyReceipts(keyId: string, sinceMs: number, limit: number): Promise<ReceiptRecord[]> {
    const rows = (await this.db.run((sql) =>
      sql.unsafe(`SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE key_id = $1 AND issued_at >= $2::bigint ORDER BY seq LIMIT $3::integer`, [
        keyId,
        BigInt(sinceMs),
        limit,
      ]),
    )) as ReceiptRow[];
    return rows.map(receiptOf);
  }

  async *receiptPages(filter: { orgId: string | null; sinceMs: number | null }, pageSize: number): AsyncGenerator<ReceiptRecord[]> {
    const last = await exportBound(this.db);
    const where = conditions({ org_id: filter.orgId }, { issued_at: bigOrNull(filter.sinceMs) });
    const i = where.params.length;
    const page = `SELECT n, ${RECEIPT_COLUMNS} FROM receipts ${where.sql === "" ? "WHERE" : `${where.sql} AND`}
       n > $${i + 1}::bigint AND n <= $${i + 2}::bigint ORDER BY n LIMIT $${i + 3}::integer`;
    for (let after = 0n; ; ) {
      const rows = (await this.db.run((sql) => sql.unsafe(page, [...where.params, after, last, pageSize]))) as (ReceiptRow & { n: bigint })[];
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.n;
      yield rows.map(receiptOf);
    }
  }

  exportChunks(filter: { orgId: string | null; sinceMs: number | null }): AsyncIterable<Uint8Array> {
    return chunksOfPages(this.receiptPages(filter, EXPORT_PAGE));
  }

  /**
   * The audit table's rows and the entries read out of receipts, each branch cut to the limit by
   * its own index-driven query, then merged (mergeAudit). A receipt whose audit row migration 8
   * kept is answered by that row, not twice.
   */
  async audit(f: AuditFilter): Promise<AuditEntry[]> {
    const plain = conditions({ org_id: f.orgId, key_id: f.keyId }, { at: bigOrNull(f.sinceMs) });
    // A key's receipts by its chain (its write order), the others by n (receipts_org_n within an org).
    // OFFSET 0 keeps the kept-row test one index probe per receipt read: as an anti-join,
    // PostgreSQL may read every kept row for each page.
    const signed = conditions({ key_id: f.keyId, org_id: f.orgId }, { issued_at: bigOrNull(f.sinceMs) });
    // One snapshot for both branches: a row another node commits in between is in both or neither.
    const [rows, receipts] = await this.db.run((sql) =>
      sql.begin("isolation level repeatable read read only", async (tx) => [
        (await tx.unsafe(
          `SELECT at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id FROM audit
           ${plain.sql} ORDER BY id LIMIT $${plain.params.length + 1}::integer`,
          [...plain.params, f.limit],
        )) as AuditRow[],
        (await tx.unsafe(
          `SELECT issued_at, payload FROM receipts ${signed.sql === "" ? "WHERE" : `${signed.sql} AND`}
             NOT EXISTS (SELECT 1 FROM audit kept WHERE kept.receipt_id = receipts.id OFFSET 0)
           ORDER BY ${f.keyId === null ? "n" : "seq"} LIMIT $${signed.params.length + 1}::integer`,
          [...signed.params, f.limit],
        )) as { issued_at: bigint; payload: string }[],
      ]),
    );
    return mergeAudit(
      receipts.map((r) => auditOfReceipt(r.payload, toSafe(r.issued_at))),
      rows.map(auditOf),
      f.limit,
    );
  }

  async heldResult(receiptId: string, now: number): Promise<HeldResult | null> {
    const [row] = await this.db.run(
      (sql) => sql`SELECT key_id, result, held_until FROM held_results WHERE receipt_id = ${receiptId} AND held_until > ${BigInt(now)}::bigint`,
    );
    if (row === undefined) return null;
    return { receiptId, keyId: row.key_id, result: JSON.parse(row.result) as Record<string, unknown>, heldUntil: toSafe(row.held_until) };
  }

  async heldAmong(receiptIds: readonly string[], now: number): Promise<Set<string>> {
    if (receiptIds.length === 0) return new Set();
    const rows = await this.db.run(
      (sql) => sql`SELECT receipt_id FROM held_results WHERE held_until > ${BigInt(now)}::bigint AND receipt_id = ANY(${[...receiptIds]}::text[])`,
    );
    return new Set(rows.map((r: { receipt_id: string }) => r.receipt_id));
  }

  /** Makes `kid` this node's current key (its previous one retired); the other nodes' keys are untouched. */
  async addSigningKey(kid: string, publicJwk: ReceiptJwk, now: number): Promise<void> {
    if (this.node === null) throw new Error("a signing key is published by a node");
    const nodeId = this.node.id;
    await this.db.run(async (sql) => {
      const [owner] = await sql`SELECT node_id FROM signing_keys WHERE kid = ${kid}`;
      if (owner !== undefined && owner.node_id !== nodeId) throw new SigningKeyTaken(kid, owner.node_id);
      await registerSigningKey(sql, nodeId, kid, JSON.stringify(publicJwk), now);
    });
  }

  /** Every node's keys, current ones first. */
  async signingKeys(): Promise<SigningKeyRecord[]> {
    return (await this.db.run(listSigningKeys)).map(signingKeyOf);
  }

  async meta(name: string): Promise<string | null> {
    const [row] = await this.db.run((sql) => sql`SELECT value FROM meta WHERE name = ${name}`);
    return (row?.value as string | undefined) ?? null;
  }

  /** A claim that waits for another node's insert of the same name finds it there: false. */
  async setMetaOnce(name: string, value: string): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`INSERT INTO meta (name, value) VALUES (${name}, ${value}) ON CONFLICT (name) DO NOTHING RETURNING name`);
    return rows.length === 1;
  }
}

/** How long an export waits for the receipts being written when it starts (a clearing's transaction ends within its timeouts). */
const EXPORT_WAIT_MS = 20_000;

/**
 * The last n an export includes: the last one handed out when it starts, once every transaction
 * that may hold an n up to it has ended. n is taken at INSERT, not at commit, so a transaction
 * holding a lower n can commit after one holding a higher; a bound read from the committed rows
 * alone would let a page miss that receipt, or take it in after the start. Every INSERT holds its
 * RowExclusiveLock on receipts from before it takes its n until it ends, so the transactions that
 * hold the lock just after the last n is read are all that may still commit one below it; the
 * export waits for those (as CREATE INDEX CONCURRENTLY does) without blocking the clearings. (The
 * sequence keeps its CACHE 1: a cache would let a session hold values it has not yet used.)
 * Afterwards every n up to the bound is committed or never will be, and receipts are
 * append-only: each page reads a part of one fixed set, however long the export takes.
 */
async function exportBound(db: Db, waitMs = EXPORT_WAIT_MS): Promise<bigint> {
  const [seq] = await db.run((sql) => sql`SELECT pg_sequence_last_value(pg_get_serial_sequence('receipts', 'n')::regclass) AS last`);
  const last = (seq?.last as bigint | null) ?? 0n;
  const writersAmong = async (among: string[] | null): Promise<string[]> => {
    const rows = await db.run(
      (sql) => sql`
        SELECT DISTINCT virtualtransaction AS vxid FROM pg_locks
         WHERE locktype = 'relation' AND relation = 'receipts'::regclass AND mode = 'RowExclusiveLock'
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND pid IS DISTINCT FROM pg_backend_pid() AND (${among}::text[] IS NULL OR virtualtransaction = ANY(${among}::text[]))`,
    );
    return rows.map((r: { vxid: string }) => r.vxid);
  };
  const until = Date.now() + waitMs;
  for (let writers = await writersAmong(null); writers.length > 0; writers = await writersAmong(writers)) {
    if (Date.now() > until) throw new LedgerUnavailable("a transaction writing receipts outlasted the export's wait");
    await Bun.sleep(2);
  }
  return last;
}

/**
 * A WHERE clause naming only the filters given. `($1 IS NULL OR col = $1)` in a prepared
 * statement lets PostgreSQL settle on a generic plan that cannot use the org or key index, and
 * read the whole table for the smallest org.
 */
function conditions(equal: Record<string, string | null>, atLeast: Record<string, bigint | null>): { sql: string; params: (string | bigint)[] } {
  const parts: string[] = [];
  const params: (string | bigint)[] = [];
  for (const [column, value] of Object.entries(equal)) {
    if (value === null) continue;
    params.push(value);
    parts.push(`${column} = $${params.length}`);
  }
  for (const [column, value] of Object.entries(atLeast)) {
    if (value === null) continue;
    params.push(value);
    parts.push(`${column} >= $${params.length}::bigint`);
  }
  return { sql: parts.length === 0 ? "" : `WHERE ${parts.join(" AND ")}`, params };
}
