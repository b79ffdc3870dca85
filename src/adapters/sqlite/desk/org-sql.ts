// How the SQLite desk ledger reads an organization's budget row in SQL: the org's period at the
// caller's `now` follows the reset its first budget record fixed, and its row holds the spend of
// its latest period only (as a key's does, connection.ts SPENT_IN_PERIOD).
import { periodOf } from "../../../core/desk/period.ts";

/** The org period at `now` of an org_budgets row named `o` (`o.` for a correlated subquery, "" inside its own UPDATE). */
export const orgPeriodAt = (o: string) => `(CASE ${o}reset WHEN 'daily' THEN :org_daily WHEN 'monthly' THEN :org_monthly ELSE 'none' END)`;

/** What the org_budgets row `o` has spent in its period at `now`. */
export const orgSpentAt = (o: string) => `(CASE WHEN ${o}period = ${orgPeriodAt(o)} THEN ${o}spent_mc ELSE 0 END)`;

/** The parameters orgPeriodAt reads. */
export const orgPeriods = (now: number) => ({ org_daily: periodOf("daily", now), org_monthly: periodOf("monthly", now) });
