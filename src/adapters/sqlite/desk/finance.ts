// Organization budgets and their signed records in the SQLite desk ledger. Each change is one
// IMMEDIATE transaction: the budget row, the org's chain of records (append-only, triggers in
// the migration) and the top-up's reference (unique per org) commit together or not at all.
// The money path (money.ts) reads and writes the same rows inside its own transactions.
import { periodOf, periodStart } from "../../../core/desk/period.ts";
import type { BudgetChange, BudgetChangeResult, Clock, FinanceStore, OrgRecordMaker, StatementData, Topup, TopupResult } from "../../../core/desk/ports.ts";
import type { OrgBudget, StoredOrgRecord } from "../../../core/desk/records.ts";
import { newId } from "../../../core/desk/secrets.ts";
import type { OrgRecordEnvelope, OrgRecordFields } from "../../../core/finance/org-records.ts";
import { readableReceipt } from "../../../core/receipt/index.ts";
import type { Sql } from "./connection.ts";
import { orgPeriods, orgSpentAt } from "./org-sql.ts";
import { type OrgBudgetRow, type OrgRecordRow, orgBudgetOf, orgRecordOf } from "./rows.ts";

export class SqliteFinance implements FinanceStore {
  constructor(private readonly sql: Sql) {}

  async budget(orgId: string): Promise<OrgBudget | null> {
    const row = this.row(orgId);
    return row === null ? null : orgBudgetOf(row);
  }

  async setBudget(change: BudgetChange, make: OrgRecordMaker): Promise<BudgetChangeResult> {
    try {
      return this.setBudgetNow(change, make);
    } catch (err) {
      if (err instanceof OverBudget) return { kind: "over_budget" };
      throw err;
    }
  }

  private setBudgetNow(change: BudgetChange, make: OrgRecordMaker): BudgetChangeResult {
    return this.sql.immediate((): BudgetChangeResult => {
      if (!this.orgExists(change.orgId)) return { kind: "missing" };
      const row = this.row(change.orgId);
      if (row === null) return this.firstBudget(change, make);
      if (change.reset !== null && change.reset !== row.reset) return { kind: "reset_fixed" };
      const spent = this.sql.db
        .query(`SELECT ${orgSpentAt("")} AS spent FROM org_budgets WHERE org_id = :org`)
        .get({ org: change.orgId, ...orgPeriods(change.now) }) as { spent: number };
      if (change.budgetMc !== null && change.budgetMc < spent.spent) return { kind: "over_budget" };
      if (change.budgetMc === row.budget_mc) return { kind: "set", record: null, budget: orgBudgetOf(row) };
      this.sql.db.query("UPDATE org_budgets SET budget_mc = ? WHERE org_id = ?").run(change.budgetMc, change.orgId);
      const record = this.append(change.orgId, change.now, make, {
        type: "budget_set",
        amount_mc: 0,
        budget_mc: change.budgetMc,
        reset: row.reset,
        reference: null,
      });
      return { kind: "set", record, budget: orgBudgetOf(this.row(change.orgId)!) };
    });
  }

  /**
   * The org's first budget: what its current period already spent (charges, and reservations
   * still open) is counted from the reservations taken since the period began, and those are
   * marked with the org period, so their refunds go back to it as later ones do.
   */
  private firstBudget(change: BudgetChange, make: OrgRecordMaker): BudgetChangeResult {
    if (change.reset === null) return { kind: "reset_needed" };
    const db = this.sql.db;
    const period = periodOf(change.reset, change.now);
    const counted = db
      .query(
        `UPDATE reservations SET org_period = :period
         WHERE org_id = :org AND created_at >= :start AND (state = 'open' OR outcome = 'charged')
         RETURNING price_mc, outcome`,
      )
      .all({ org: change.orgId, period, start: periodStart(change.reset, change.now) }) as { price_mc: number; outcome: string | null }[];
    // Charges of this period whose reservations were pruned are in settled_pruned, by UTC day.
    const startDay = new Date(periodStart(change.reset, change.now)).toISOString().slice(0, 10);
    const pruned = db
      .query("UPDATE settled_pruned SET org_period = ? WHERE org_id = ? AND org_period = '' AND day >= ? RETURNING charged_mc")
      .all(period, change.orgId, startDay) as { charged_mc: number }[];
    const prunedCharges = pruned.reduce((sum, r) => sum + r.charged_mc, 0);
    const spent = counted.reduce((sum, r) => sum + r.price_mc, 0) + prunedCharges;
    const charged = counted.reduce((sum, r) => sum + (r.outcome === "charged" ? r.price_mc : 0), 0) + prunedCharges;
    // The throw rolls back the marks just written with the rest of the transaction.
    if (change.budgetMc !== null && change.budgetMc < spent) throw new OverBudget();
    db.query("INSERT INTO org_budgets (org_id, budget_mc, reset, period, spent_mc) VALUES (?, ?, ?, ?, ?)").run(
      change.orgId,
      change.budgetMc,
      change.reset,
      period,
      spent,
    );
    db.query("INSERT INTO org_spend (org_id, period, spent_mc, charged_mc) VALUES (?, ?, ?, ?)").run(change.orgId, period, spent, charged);
    const record = this.append(change.orgId, change.now, make, {
      type: "budget_set",
      amount_mc: 0,
      budget_mc: change.budgetMc,
      reset: change.reset,
      reference: null,
    });
    return { kind: "set", record, budget: orgBudgetOf(this.row(change.orgId)!) };
  }

  async topUp(topup: Topup, make: OrgRecordMaker): Promise<TopupResult> {
    return this.sql.immediate((): TopupResult => {
      if (!this.orgExists(topup.orgId)) return { kind: "missing" };
      const prior = this.sql.db.query("SELECT * FROM org_records WHERE org_id = ? AND reference = ?").get(topup.orgId, topup.reference) as OrgRecordRow | null;
      if (prior !== null) {
        if (prior.amount_mc !== topup.amountMc) return { kind: "conflict" };
        return { kind: "existing", record: orgRecordOf(prior), budget: orgBudgetOf(this.row(topup.orgId)!) };
      }
      const row = this.row(topup.orgId);
      if (row === null || row.budget_mc === null) return { kind: "unlimited" };
      const budgetMc = row.budget_mc + topup.amountMc;
      if (!Number.isSafeInteger(budgetMc)) return { kind: "too_large" };
      this.sql.db.query("UPDATE org_budgets SET budget_mc = ? WHERE org_id = ?").run(budgetMc, topup.orgId);
      const record = this.append(topup.orgId, topup.now, make, {
        type: "topup",
        amount_mc: topup.amountMc,
        budget_mc: budgetMc,
        reset: row.reset,
        reference: topup.reference,
      });
      return { kind: "added", record, budget: orgBudgetOf(this.row(topup.orgId)!) };
    });
  }

  async records(orgId: string): Promise<StoredOrgRecord[]> {
    const rows = this.sql.db.query("SELECT sha256, envelope FROM org_records WHERE org_id = ? ORDER BY seq").all(orgId) as OrgRecordRow[];
    return rows.map(orgRecordOf);
  }

  async statementData(orgId: string, clock: Clock): Promise<StatementData> {
    return this.sql.immediate((): StatementData => {
      // Taken while this transaction holds the ledger: every receipt signed before it is committed.
      const issuedAt = clock();
      const db = this.sql.db;
      const records = (db.query("SELECT envelope FROM org_records WHERE org_id = ? ORDER BY seq").all(orgId) as { envelope: string }[]).map((r) => {
        const envelope = JSON.parse(r.envelope) as OrgRecordEnvelope;
        return { envelope, record: envelope.record };
      });
      const receipts = (
        db.query("SELECT sha256, payload FROM receipts WHERE org_id = ? AND issued_at < ? ORDER BY key_id, seq").all(orgId, issuedAt) as {
          sha256: Uint8Array;
          payload: string;
        }[]
      ).map((r) => ({ receipt: readableReceipt(r.payload), payloadSha256: Buffer.from(r.sha256).toString("hex") }));
      return { issuedAt, records, receipts };
    });
  }

  async thresholds(orgId: string): Promise<readonly number[] | null> {
    const row = this.sql.db.query("SELECT alert_thresholds FROM orgs WHERE id = ?").get(orgId) as { alert_thresholds: string } | null;
    return row === null ? null : (JSON.parse(row.alert_thresholds) as number[]);
  }

  async setThresholds(orgId: string, thresholds: readonly number[]): Promise<boolean> {
    return this.sql.db.query("UPDATE orgs SET alert_thresholds = ? WHERE id = ?").run(JSON.stringify(thresholds), orgId).changes === 1;
  }

  /** Signs and stores the org's next record, chained to its last; issued never before the last one. */
  private append(
    orgId: string,
    now: number,
    make: OrgRecordMaker,
    fields: Pick<OrgRecordFields, "type" | "amount_mc" | "budget_mc" | "reset" | "reference">,
  ): StoredOrgRecord {
    const db = this.sql.db;
    const last = db.query("SELECT seq, sha256, issued_at FROM org_records WHERE org_id = ? ORDER BY seq DESC LIMIT 1").get(orgId) as Pick<
      OrgRecordRow,
      "seq" | "sha256" | "issued_at"
    > | null;
    const issuedAt = Math.max(now, last?.issued_at ?? 0);
    const stored = make({
      ...fields,
      id: newId("orec"),
      issued_at: new Date(issuedAt).toISOString(),
      org_id: orgId,
      seq: (last?.seq ?? 0) + 1,
      prev_sha256: last?.sha256 ?? null,
    } as OrgRecordFields);
    const r = stored.record;
    db.query(
      `INSERT INTO org_records (org_id, seq, id, type, issued_at, amount_mc, budget_mc, reference, sha256, envelope)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(orgId, r.seq, r.id, r.type, issuedAt, r.amount_mc, r.budget_mc, r.reference, stored.sha256, stored.envelope);
    return stored;
  }

  private orgExists(orgId: string): boolean {
    return this.sql.db.query("SELECT 1 FROM orgs WHERE id = ?").get(orgId) !== null;
  }

  private row(orgId: string): OrgBudgetRow | null {
    return this.sql.db.query("SELECT org_id, budget_mc, reset, period, spent_mc FROM org_budgets WHERE org_id = ?").get(orgId) as OrgBudgetRow | null;
  }
}

/** Thrown inside a first budget's transaction to roll back the reservations it marked. */
class OverBudget extends Error {}
