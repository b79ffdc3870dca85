// The alert outbox in PostgreSQL. Alerts are written by the money path inside the transaction of
// the charge or refusal that raised them (org-money.ts); the delivery loops of every node claim
// them here. A claim takes due rows FOR UPDATE SKIP LOCKED and leases them in the same
// statement, so two nodes' loops never hold one alert at once and neither waits on the other.
// A lease names its node: a restarted node frees only the leases of its own id (the previous
// process of that id is gone, as the node lease says), never a live node's, whose attempts end
// on their own or expire.
import type { AlertStore } from "../../core/desk/ports.ts";
import type { AlertRecord, AlertScope } from "../../core/desk/records.ts";
import type { OutboxAlert } from "../../core/finance/alert-outbox.ts";
import type { Db } from "./db.ts";
import { toSafe } from "./money.ts";
import type { NodeSession } from "./node.ts";

const ALERT_COLUMNS =
  "id, scope, subject_id, org_id, key_id, period, threshold_pct, budget_mc, body, created_at, next_at, attempts, last_error, delivered_at, gave_up_at";

const orNull = (v: bigint | null) => (v === null ? null : toSafe(v));

type AlertRow = {
  id: string;
  scope: AlertScope;
  subject_id: string;
  org_id: string;
  key_id: string;
  period: string;
  threshold_pct: number;
  budget_mc: bigint;
  body: string;
  created_at: bigint;
  next_at: bigint;
  attempts: number;
  last_error: string | null;
  delivered_at: bigint | null;
  gave_up_at: bigint | null;
};

const alertOf = (r: AlertRow): AlertRecord => ({
  id: r.id,
  scope: r.scope,
  subjectId: r.subject_id,
  orgId: r.org_id,
  keyId: r.key_id,
  period: r.period,
  thresholdPct: r.threshold_pct,
  budgetMc: toSafe(r.budget_mc),
  body: r.body,
  createdAt: toSafe(r.created_at),
  nextAt: toSafe(r.next_at),
  attempts: r.attempts,
  lastError: r.last_error,
  deliveredAt: orNull(r.delivered_at),
  gaveUpAt: orNull(r.gave_up_at),
});

export class PostgresAlerts implements AlertStore {
  constructor(
    private readonly db: Db,
    private readonly node: NodeSession | null,
  ) {}

  async claimDue(nowMs: number, limit: number, leaseUntilMs: number): Promise<OutboxAlert[]> {
    const now = BigInt(nowMs);
    const rows = (await this.db.run(
      (sql) => sql`
        UPDATE alerts SET leased_until = ${BigInt(leaseUntilMs)}::bigint, leased_by = ${this.node?.id ?? null}
         WHERE id IN (
           SELECT id FROM alerts
            WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_at <= ${now}::bigint
              AND (leased_until IS NULL OR leased_until <= ${now}::bigint)
            ORDER BY created_at, n LIMIT ${limit}::integer
            FOR UPDATE SKIP LOCKED)
        RETURNING id, body, attempts, created_at, n`,
    )) as { id: string; body: string; attempts: number; created_at: bigint; n: bigint }[];
    rows.sort((a, b) => (a.created_at === b.created_at ? Number(a.n - b.n) : a.created_at < b.created_at ? -1 : 1));
    return rows.map((r) => ({ id: r.id, body: r.body, attempts: r.attempts }));
  }

  async markDelivered(id: string, atMs: number): Promise<void> {
    await this.db.run(
      (sql) => sql`
        UPDATE alerts SET delivered_at = ${BigInt(atMs)}::bigint, leased_until = NULL, leased_by = NULL
         WHERE id = ${id} AND delivered_at IS NULL AND gave_up_at IS NULL`,
    );
  }

  async markAttempt(id: string, atMs: number, nextAtMs: number | null, error: string): Promise<void> {
    const next = nextAtMs === null ? null : BigInt(nextAtMs);
    await this.db.run(
      (sql) => sql`
        UPDATE alerts SET attempts = attempts + 1, last_error = ${error}, leased_until = NULL, leased_by = NULL,
               next_at = coalesce(${next}::bigint, next_at),
               gave_up_at = CASE WHEN ${next}::bigint IS NULL THEN ${BigInt(atMs)}::bigint ELSE NULL END
         WHERE id = ${id} AND delivered_at IS NULL AND gave_up_at IS NULL`,
    );
  }

  async list(filter: { orgId: string | null; limit: number }): Promise<AlertRecord[]> {
    // Two statements, not `($1 IS NULL OR org_id = $1)`: a generic plan of that one reads the
    // whole table for the smallest org.
    const rows = (await this.db.run((sql) =>
      filter.orgId === null
        ? sql.unsafe(`SELECT ${ALERT_COLUMNS} FROM alerts ORDER BY created_at DESC, n DESC LIMIT $1::integer`, [filter.limit])
        : sql.unsafe(`SELECT ${ALERT_COLUMNS} FROM alerts WHERE org_id = $1 ORDER BY created_at DESC, n DESC LIMIT $2::integer`, [filter.orgId, filter.limit]),
    )) as AlertRow[];
    return rows.map(alertOf);
  }

  /** The leases this node's id held before it started: its previous process's, cut by its end. Another node's are left to expire. */
  async releaseLeases(): Promise<number> {
    if (this.node === null) return 0;
    const id = this.node.id;
    const rows = await this.db.run(
      (sql) => sql`UPDATE alerts SET leased_until = NULL, leased_by = NULL WHERE leased_by = ${id} AND leased_until IS NOT NULL RETURNING id`,
    );
    return rows.length;
  }
}
