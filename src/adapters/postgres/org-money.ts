// What the PostgreSQL money path reads and writes of an organization's budget beside the key's
// (SPEC 8.16, 8.17): the org's period at the caller's `now` (the reset its first budget record
// fixed), its room, the settled charges thresholds are measured against, and the alerts an
// outcome raised, written in the caller's transaction.
import type { SQL } from "bun";
import { periodOf } from "../../core/desk/period.ts";
import { newId } from "../../core/desk/secrets.ts";
import { alertsOf, type NewAlert, type ScopeOutcome } from "../../core/finance/alerts.ts";
import { toSafe } from "./money.ts";
import { percentagesOf } from "./rows.ts";

/** The periods an org row's reset maps `now` to, as the SQL below reads them. */
export const orgPeriodsAt = (now: number) => ({ daily: periodOf("daily", now), monthly: periodOf("monthly", now) });

/** The lesser room; null (an org without a limit) leaves the key's. */
export const lesser = (keyRoom: number, orgRoom: number | null) => (orgRoom === null ? keyRoom : Math.min(keyRoom, Math.max(0, orgRoom)));

/** The org's room at `now` (null: no budget row, or an unlimited one). */
export async function orgRoom(sql: SQL, orgId: string, now: number): Promise<number | null> {
  const { daily, monthly } = orgPeriodsAt(now);
  const [row] = await sql`
    SELECT budget_mc - (CASE WHEN period = (CASE reset WHEN 'daily' THEN ${daily} WHEN 'monthly' THEN ${monthly} ELSE 'none' END)
                             THEN spent_mc ELSE 0 END) AS remaining
      FROM org_budgets WHERE org_id = ${orgId}`;
  return row === undefined || row.remaining === null ? null : toSafe(row.remaining);
}

/** The org's budget, thresholds, row period and settled charges in its period at `now`; null without a budget row. */
export async function orgScopeAt(sql: SQL, orgId: string, now: number) {
  const { daily, monthly } = orgPeriodsAt(now);
  const [row] = await sql`
    WITH o AS (
      SELECT b.org_id, b.budget_mc, b.period AS row_period, g.alert_thresholds,
             (CASE b.reset WHEN 'daily' THEN ${daily} WHEN 'monthly' THEN ${monthly} ELSE 'none' END) COLLATE "C" AS period
        FROM org_budgets b JOIN orgs g ON g.id = b.org_id WHERE b.org_id = ${orgId}
    )
    SELECT o.*, coalesce((SELECT s.charged_mc FROM org_spend s WHERE s.org_id = o.org_id AND s.period = o.period), 0) AS charged
      FROM o`;
  if (row === undefined) return null;
  return {
    period: row.period as string,
    rowPeriod: row.row_period as string,
    chargedMc: toSafe(row.charged),
    budgetMc: row.budget_mc === null ? null : toSafe(row.budget_mc),
    thresholds: percentagesOf(row.alert_thresholds),
  };
}

/** Writes the alerts `outcomes` raised inside the caller's transaction; one whose unique row exists is skipped. How many were written. */
export async function writeAlerts(tx: SQL, outcomes: readonly ScopeOutcome[]): Promise<number> {
  let written = 0;
  for (const outcome of outcomes) for (const a of alertsOf(outcome, () => newId("alrt"))) written += await insertAlert(tx, a);
  return written;
}

export async function insertAlert(tx: SQL, a: NewAlert): Promise<number> {
  const rows = await tx`
    INSERT INTO alerts (id, scope, subject_id, org_id, key_id, period, threshold_pct, budget_mc, body, created_at, next_at)
    VALUES (${a.id}, ${a.scope}, ${a.subjectId}, ${a.orgId}, ${a.keyId}, ${a.period}, ${a.thresholdPct}::integer, ${BigInt(a.budgetMc)}::bigint,
            ${a.body}, ${BigInt(a.createdAt)}::bigint, ${BigInt(a.createdAt)}::bigint)
    ON CONFLICT (scope, subject_id, period, threshold_pct, budget_mc) DO NOTHING
    RETURNING id`;
  return rows.length;
}
