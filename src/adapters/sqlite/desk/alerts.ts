// The alert outbox in SQLite: alerts are written by the money path inside the transaction of
// the charge (or refusal) that raised them, one row per (scope, subject, period, threshold,
// budget) whatever the concurrency; the delivery loop claims, leases and marks them here, each
// call one transaction. A lease is its own column beside the next attempt, so a restarted desk
// (the only one on its data directory) can free the leases of the process that died.
import type { AlertStore } from "../../../core/desk/ports.ts";
import type { AlertRecord } from "../../../core/desk/records.ts";
import type { OutboxAlert } from "../../../core/finance/alert-outbox.ts";
import type { NewAlert } from "../../../core/finance/alerts.ts";
import type { Sql } from "./connection.ts";
import { type AlertRow, alertOf } from "./rows.ts";

const PENDING = "delivered_at IS NULL AND gave_up_at IS NULL";

export class SqliteAlerts implements AlertStore {
  constructor(private readonly sql: Sql) {}

  /** Writes new alerts inside the caller's transaction; those whose unique key is taken are skipped. How many were written. */
  writeNow(alerts: readonly NewAlert[]): number {
    let written = 0;
    for (const a of alerts) {
      written += this.sql.db
        .query(
          `INSERT INTO alerts (id, scope, subject_id, org_id, key_id, period, threshold_pct, budget_mc, body, created_at, next_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (scope, subject_id, period, threshold_pct, budget_mc) DO NOTHING`,
        )
        .run(a.id, a.scope, a.subjectId, a.orgId, a.keyId, a.period, a.thresholdPct, a.budgetMc, a.body, a.createdAt, a.createdAt).changes;
    }
    return written;
  }

  async claimDue(nowMs: number, limit: number, leaseUntilMs: number): Promise<OutboxAlert[]> {
    return this.sql.immediate(() => {
      const rows = this.sql.db
        .query(
          `SELECT id, body, attempts FROM alerts
           WHERE ${PENDING} AND next_at <= :now AND (leased_until IS NULL OR leased_until <= :now)
           ORDER BY created_at, rowid LIMIT :limit`,
        )
        .all({ now: nowMs, limit }) as OutboxAlert[];
      const lease = this.sql.db.query("UPDATE alerts SET leased_until = ? WHERE id = ?");
      for (const r of rows) lease.run(leaseUntilMs, r.id);
      return rows.map((r) => ({ id: r.id, body: r.body, attempts: r.attempts }));
    });
  }

  async markDelivered(id: string, atMs: number): Promise<void> {
    this.sql.db.query(`UPDATE alerts SET delivered_at = ?, leased_until = NULL WHERE id = ? AND ${PENDING}`).run(atMs, id);
  }

  async markAttempt(id: string, atMs: number, nextAtMs: number | null, error: string): Promise<void> {
    this.sql.db
      .query(
        `UPDATE alerts SET attempts = attempts + 1, last_error = :error, leased_until = NULL,
           next_at = coalesce(:next, next_at), gave_up_at = CASE WHEN :next IS NULL THEN :at ELSE NULL END
         WHERE id = :id AND ${PENDING}`,
      )
      .run({ id, at: atMs, next: nextAtMs, error });
  }

  async list(filter: { orgId: string | null; limit: number }): Promise<AlertRecord[]> {
    const rows = this.sql.db
      .query("SELECT * FROM alerts WHERE (:org IS NULL OR org_id = :org) ORDER BY created_at DESC, rowid DESC LIMIT :limit")
      .all({ org: filter.orgId, limit: filter.limit }) as AlertRow[];
    return rows.map(alertOf);
  }

  async releaseLeases(): Promise<number> {
    return this.sql.db.query("UPDATE alerts SET leased_until = NULL WHERE leased_until IS NOT NULL").run().changes;
  }
}
