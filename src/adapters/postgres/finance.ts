// Organization budgets and their signed records in the PostgreSQL desk ledger. Every change takes
// the org's row lock first (orgs FOR UPDATE), so changes of one org, from any node, run one at a
// time: the record chain's next seq, the top-up's reference (unique per org) and the budget row
// commit together or not at all. The money path (money.ts) locks the budget row itself.
import type { SQL } from "bun";
import { periodOf, periodStart, type Reset } from "../../core/desk/period.ts";
import type { BudgetChange, BudgetChangeResult, Clock, FinanceStore, OrgRecordMaker, StatementData, Topup, TopupResult } from "../../core/desk/ports.ts";
import type { OrgBudget, StoredOrgRecord } from "../../core/desk/records.ts";
import { newId } from "../../core/desk/secrets.ts";
import type { OrgRecordEnvelope, OrgRecordFields } from "../../core/finance/org-records.ts";
import { readableReceipt, sha256Hex } from "../../core/receipt/index.ts";
import type { Db } from "./db.ts";
import { toSafe } from "./money.ts";
import { percentagesOf } from "./rows.ts";

type BudgetRow = { budget_mc: bigint | null; reset: Reset; period: string; spent_mc: bigint };

const budgetOf = (r: BudgetRow): OrgBudget => ({
  budgetMc: r.budget_mc === null ? null : toSafe(r.budget_mc),
  reset: r.reset,
  period: r.period,
  spentMc: toSafe(r.spent_mc),
});

const storedOf = (r: { sha256: string; envelope: string }): StoredOrgRecord => ({
  record: (JSON.parse(r.envelope) as OrgRecordEnvelope).record,
  sha256: r.sha256,
  envelope: r.envelope,
});

/** Rolls the transaction back (the first budget's marks with it) and answers over_budget. */
class OverBudget extends Error {}

export class PostgresFinance implements FinanceStore {
  constructor(private readonly db: Db) {}

  async budget(orgId: string): Promise<OrgBudget | null> {
    const [row] = (await this.db.run((sql) => sql`SELECT budget_mc, reset, period, spent_mc FROM org_budgets WHERE org_id = ${orgId}`)) as BudgetRow[];
    return row === undefined ? null : budgetOf(row);
  }

  async setBudget(change: BudgetChange, make: OrgRecordMaker): Promise<BudgetChangeResult> {
    try {
      return await this.db.tx(async (tx): Promise<BudgetChangeResult> => {
        if (!(await lockOrg(tx, change.orgId))) return { kind: "missing" };
        const [row] = (await tx`SELECT budget_mc, reset, period, spent_mc FROM org_budgets WHERE org_id = ${change.orgId} FOR UPDATE`) as BudgetRow[];
        if (row === undefined) return firstBudget(tx, change, make);
        if (change.reset !== null && change.reset !== row.reset) return { kind: "reset_fixed" };
        const spent = periodOf(row.reset, change.now) === row.period ? toSafe(row.spent_mc) : 0;
        if (change.budgetMc !== null && change.budgetMc < spent) return { kind: "over_budget" };
        const current = row.budget_mc === null ? null : toSafe(row.budget_mc);
        if (change.budgetMc === current) return { kind: "set", record: null, budget: budgetOf(row) };
        const [updated] = (await tx`
          UPDATE org_budgets SET budget_mc = ${change.budgetMc === null ? null : BigInt(change.budgetMc)}::bigint WHERE org_id = ${change.orgId}
          RETURNING budget_mc, reset, period, spent_mc`) as BudgetRow[];
        const record = await append(tx, change.orgId, change.now, make, {
          type: "budget_set",
          amount_mc: 0,
          budget_mc: change.budgetMc,
          reset: row.reset,
          reference: null,
        });
        return { kind: "set", record, budget: budgetOf(updated!) };
      });
    } catch (err) {
      if (err instanceof OverBudget) return { kind: "over_budget" };
      throw err;
    }
  }

  async topUp(topup: Topup, make: OrgRecordMaker): Promise<TopupResult> {
    return this.db.tx(async (tx): Promise<TopupResult> => {
      if (!(await lockOrg(tx, topup.orgId))) return { kind: "missing" };
      const [prior] = await tx`SELECT amount_mc, sha256, envelope FROM org_records WHERE org_id = ${topup.orgId} AND reference = ${topup.reference}`;
      const [row] = (await tx`SELECT budget_mc, reset, period, spent_mc FROM org_budgets WHERE org_id = ${topup.orgId} FOR UPDATE`) as BudgetRow[];
      if (prior !== undefined) {
        if (toSafe(prior.amount_mc) !== topup.amountMc) return { kind: "conflict" };
        return { kind: "existing", record: storedOf(prior), budget: budgetOf(row!) };
      }
      if (row === undefined || row.budget_mc === null) return { kind: "unlimited" };
      const budgetMc = toSafe(row.budget_mc) + topup.amountMc;
      if (!Number.isSafeInteger(budgetMc)) return { kind: "too_large" };
      const [updated] = (await tx`
        UPDATE org_budgets SET budget_mc = ${BigInt(budgetMc)}::bigint WHERE org_id = ${topup.orgId}
        RETURNING budget_mc, reset, period, spent_mc`) as BudgetRow[];
      const record = await append(tx, topup.orgId, topup.now, make, {
        type: "topup",
        amount_mc: topup.amountMc,
        budget_mc: budgetMc,
        reset: row.reset,
        reference: topup.reference,
      });
      return { kind: "added", record, budget: budgetOf(updated!) };
    });
  }

  async records(orgId: string): Promise<StoredOrgRecord[]> {
    const rows = await this.db.run((sql) => sql`SELECT sha256, envelope FROM org_records WHERE org_id = ${orgId} ORDER BY seq`);
    return (rows as { sha256: string; envelope: string }[]).map(storedOf);
  }

  /**
   * Every transaction that signs a receipt of a key holds that key's row lock until it commits
   * (the chain head is on the row), and every budget change holds the org's: the statement takes
   * both as shared locks first, so what was signed before them is committed, and nothing is
   * signed until it has read. Then it takes `issuedAt`.
   */
  async statementData(orgId: string, clock: Clock): Promise<StatementData> {
    return this.db.tx(async (tx): Promise<StatementData> => {
      await tx`SELECT id FROM orgs WHERE id = ${orgId} FOR SHARE`;
      await tx`SELECT id FROM keys WHERE org_id = ${orgId} ORDER BY id FOR SHARE`;
      const issuedAt = clock();
      const recordRows = (await tx`SELECT envelope FROM org_records WHERE org_id = ${orgId} ORDER BY seq`) as { envelope: string }[];
      const records = recordRows.map((r) => {
        const envelope = JSON.parse(r.envelope) as OrgRecordEnvelope;
        return { envelope, record: envelope.record };
      });
      const receiptRows = (await tx`
        SELECT payload FROM receipts WHERE org_id = ${orgId} AND issued_at < ${BigInt(issuedAt)}::bigint ORDER BY key_id, seq`) as {
        payload: string;
      }[];
      const receipts = receiptRows.map((r) => ({ receipt: readableReceipt(r.payload), payloadSha256: sha256Hex(r.payload) }));
      return { issuedAt, records, receipts };
    });
  }

  async thresholds(orgId: string): Promise<readonly number[] | null> {
    const [row] = await this.db.run((sql) => sql`SELECT alert_thresholds FROM orgs WHERE id = ${orgId}`);
    return row === undefined ? null : percentagesOf(row.alert_thresholds);
  }

  async setThresholds(orgId: string, thresholds: readonly number[]): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`UPDATE orgs SET alert_thresholds = ${[...thresholds]}::integer[] WHERE id = ${orgId} RETURNING id`);
    return rows.length === 1;
  }
}

/** Locks the org's row for a budget change; false when there is no such org. */
async function lockOrg(tx: SQL, orgId: string): Promise<boolean> {
  const rows = await tx`SELECT id FROM orgs WHERE id = ${orgId} FOR UPDATE`;
  return rows.length === 1;
}

/**
 * The org's first budget: what its current period already spent (charges, and reservations
 * still open) is counted from the reservations taken since the period began, and those are
 * marked with the org period, so their refunds go back to it as later ones do. The reservations
 * table is locked against writers first: a reservation committed after the count would be
 * neither counted nor marked.
 */
async function firstBudget(tx: SQL, change: BudgetChange, make: OrgRecordMaker): Promise<BudgetChangeResult> {
  if (change.reset === null) return { kind: "reset_needed" };
  await tx`LOCK TABLE reservations IN SHARE ROW EXCLUSIVE MODE`;
  const period = periodOf(change.reset, change.now);
  const counted = (await tx`
    UPDATE reservations SET org_period = ${period}
     WHERE org_id = ${change.orgId} AND created_at >= ${BigInt(periodStart(change.reset, change.now))}::bigint AND (state = 'open' OR outcome = 'charged')
    RETURNING price_mc, outcome`) as { price_mc: bigint; outcome: string | null }[];
  // Charges of this period whose reservations were pruned are in settled_pruned, by UTC day (pruning waits on the lock above).
  const pruned = (await tx`
    UPDATE settled_pruned SET org_period = ${period}
     WHERE org_id = ${change.orgId} AND org_period = '' AND day >= ${new Date(periodStart(change.reset, change.now)).toISOString().slice(0, 10)}
    RETURNING charged_mc`) as { charged_mc: bigint }[];
  const prunedCharges = pruned.reduce((sum, r) => sum + toSafe(r.charged_mc), 0);
  const spent = counted.reduce((sum, r) => sum + toSafe(r.price_mc), 0) + prunedCharges;
  const charged = counted.reduce((sum, r) => sum + (r.outcome === "charged" ? toSafe(r.price_mc) : 0), 0) + prunedCharges;
  if (change.budgetMc !== null && change.budgetMc < spent) throw new OverBudget();
  const [row] = (await tx`
    INSERT INTO org_budgets (org_id, budget_mc, reset, period, spent_mc)
    VALUES (${change.orgId}, ${change.budgetMc === null ? null : BigInt(change.budgetMc)}::bigint, ${change.reset}, ${period}, ${BigInt(spent)}::bigint)
    RETURNING budget_mc, reset, period, spent_mc`) as BudgetRow[];
  await tx`
    INSERT INTO org_spend (org_id, period, spent_mc, charged_mc)
    VALUES (${change.orgId}, ${period}, ${BigInt(spent)}::bigint, ${BigInt(charged)}::bigint)`;
  const record = await append(tx, change.orgId, change.now, make, {
    type: "budget_set",
    amount_mc: 0,
    budget_mc: change.budgetMc,
    reset: change.reset,
    reference: null,
  });
  return { kind: "set", record, budget: budgetOf(row!) };
}

/** Signs and stores the org's next record (under the org's lock), chained to its last; issued never before the last one. */
async function append(
  tx: SQL,
  orgId: string,
  now: number,
  make: OrgRecordMaker,
  fields: Pick<OrgRecordFields, "type" | "amount_mc" | "budget_mc" | "reset" | "reference">,
): Promise<StoredOrgRecord> {
  const [last] = await tx`SELECT seq, sha256, issued_at FROM org_records WHERE org_id = ${orgId} ORDER BY seq DESC LIMIT 1`;
  const issuedAt = Math.max(now, last === undefined ? 0 : toSafe(last.issued_at));
  const stored = make({
    ...fields,
    id: newId("orec"),
    issued_at: new Date(issuedAt).toISOString(),
    org_id: orgId,
    seq: (last === undefined ? 0 : toSafe(last.seq)) + 1,
    prev_sha256: last?.sha256 ?? null,
  } as OrgRecordFields);
  const r = stored.record;
  await tx`
    INSERT INTO org_records (org_id, seq, id, type, issued_at, amount_mc, budget_mc, reference, sha256, envelope)
    VALUES (${orgId}, ${BigInt(r.seq)}::bigint, ${r.id}, ${r.type}, ${BigInt(issuedAt)}::bigint, ${BigInt(r.amount_mc)}::bigint,
            ${r.budget_mc === null ? null : BigInt(r.budget_mc)}::bigint, ${r.reference}, ${stored.sha256}, ${stored.envelope})`;
  return stored;
}
