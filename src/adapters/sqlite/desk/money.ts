// The money path in SQLite. Money is integer millicents. Nothing reads then writes outside one
// IMMEDIATE transaction: the reservation is one conditional UPDATE (the key's budget, its
// organization's, the period resets and the failure limit folded in), and each settlement moves
// the money and appends the receipt in one transaction, so a crash leaves both or neither; a
// refusal without a receipt appends its audit row in its own. Every method runs in the
// group commit (group-commit.ts), one savepoint each. A call with a receipt writes no audit row:
// its audit entry is read out of the receipt (core/desk/audit-log.ts).
import { marginOf } from "../../../core/desk/audit-log.ts";
import { FAILURES_PER_HOUR } from "../../../core/desk/limits.ts";
import { countsAsFailure, type PlainOutcome, type ReceiptOutcome, statusOf } from "../../../core/desk/outcomes.ts";
import { hourOf, periodOf } from "../../../core/desk/period.ts";
import {
  type CallContext,
  LedgerConflict,
  type MoneyLedger,
  type ReceiptMaker,
  type ReserveResult,
  type Settlement,
  type SettleResult,
  type StoredReceipt,
} from "../../../core/desk/ports.ts";
import type { ApprovalAsked, ApprovalHold, HeldResult } from "../../../core/desk/records.ts";
import { spentIn } from "../../../core/desk/records.ts";
import type { ApprovalEnvelope } from "../../../core/receipt/index.ts";
import { newId } from "../../../core/desk/secrets.ts";
import { alertsOf, type ScopeOutcome } from "../../../core/finance/alerts.ts";
import type { SqliteAlerts } from "./alerts.ts";
import { SPENT_IN_PERIOD, type Sql } from "./connection.ts";
import type { GroupCommit } from "./group-commit.ts";
import { orgPeriodAt, orgPeriods, orgSpentAt } from "./org-sql.ts";
import { type KeyRow, type ReceiptRow, type ReservationRow, receiptOf } from "./rows.ts";

/** What a settlement reads back of its reservation. */
const SETTLED_COLUMNS = "id, key_id, org_id, tool, period, price_mc, upstream_cost_mc, params_sha256, created_at, approval, org_period";
/** What a settlement reads back of its key: its room, its period rule and its alert thresholds. */
const ROOM_COLUMNS = "id, org_id, budget_mc, spent_mc, reset, period, alert_thresholds";

/** The key row's remaining budget in `period`, as `spentIn` reads it. */
const remainingIn = (key: KeyRow, period: string) => key.budget_mc - spentIn({ period: key.period, spentMc: key.spent_mc }, period);

export class SqliteMoney implements MoneyLedger {
  constructor(
    private readonly sql: Sql,
    private readonly commit: GroupCommit,
    private readonly alerts: SqliteAlerts,
  ) {}

  /** Counted as a failure as countsAsFailure says (a 429 is not: it reached nothing). */
  recordPlainRefusal(ctx: CallContext, outcome: PlainOutcome): Promise<void> {
    return this.commit.run(() =>
      this.sql.immediate(() => {
        if (countsAsFailure(outcome)) this.countFailure(ctx.key.id, ctx.hour);
        this.appendAudit(recorded(ctx), outcome);
      }),
    );
  }

  refuseNotAllowed(ctx: CallContext, make: ReceiptMaker): Promise<{ receipt: StoredReceipt; remainingMc: number }> {
    return this.commit.run(() =>
      this.sql.immediate(() => {
        const key = this.countFailure(ctx.key.id, ctx.hour)!;
        const remainingMc = this.roomOf(key, ctx.period, ctx.now);
        const call = recorded(ctx);
        const receipt = this.appendReceipt(call, make, "refused_not_allowed", 0, remainingMc, ctx.period);
        return { receipt, remainingMc };
      }),
    );
  }

  /**
   * Reserves the price with one conditional UPDATE that also rolls the period over: the budget
   * check, the reset and the spend are one statement, so parallel callers (threads, processes)
   * can never together pass a budget, and a reset cannot reopen it twice. The period only moves
   * forward: a clock stepping back cannot reopen a spent period. The same statement counts the
   * call against the hour's failure limit before it reaches the upstream (settle takes it back
   * when the call is charged): calls in flight cannot together pass the limit either. It also
   * checks the organization's budget (its room in the org's own period, which only moves
   * forward too); the org's spend is then written in the same transaction, which no other
   * writer can enter, and the org row's CHECK refuses a spend past its budget whatever happens.
   */
  reserve(ctx: CallContext, make: ReceiptMaker): Promise<ReserveResult> {
    return this.commit.run(() => this.reserveNow(ctx, make));
  }

  private reserveNow(ctx: CallContext, make: ReceiptMaker): ReserveResult {
    return this.sql.immediate((): ReserveResult => {
      const db = this.sql.db;
      const reserved = db
        .query(
          `UPDATE keys SET spent_mc = ${SPENT_IN_PERIOD} + :price, period = :period,
             fail_count = (CASE WHEN fail_hour = :hour THEN fail_count ELSE 0 END) + 1, fail_hour = :hour
           WHERE id = :id AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > :now) AND :period >= period
             AND ${SPENT_IN_PERIOD} + :price <= budget_mc
             AND (CASE WHEN fail_hour = :hour THEN fail_count ELSE 0 END) < :failures
             AND NOT EXISTS (SELECT 1 FROM org_budgets o WHERE o.org_id = keys.org_id
               AND (${orgPeriodAt("o.")} < o.period OR (o.budget_mc IS NOT NULL AND ${orgSpentAt("o.")} + :price > o.budget_mc)))
           RETURNING budget_mc - spent_mc AS remaining`,
        )
        .get({
          id: ctx.key.id,
          period: ctx.period,
          price: ctx.priceMc,
          now: ctx.now,
          hour: ctx.hour,
          failures: FAILURES_PER_HOUR,
          ...orgPeriods(ctx.now),
        }) as {
        remaining: number;
      } | null;
      if (reserved !== null) {
        db.query(
          `INSERT INTO spend (key_id, period, spent_mc) VALUES (?, ?, ?)
           ON CONFLICT (key_id, period) DO UPDATE SET spent_mc = spent_mc + excluded.spent_mc`,
        ).run(ctx.key.id, ctx.period, ctx.priceMc);
        const org = this.reserveOrg(ctx.key.orgId, ctx.priceMc, ctx.now);
        const res = db
          .query(
            `INSERT INTO reservations (key_id, org_id, tool, period, price_mc, upstream_cost_mc, params_sha256, created_at, state, org_period)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open', ?) RETURNING id`,
          )
          .get(ctx.key.id, ctx.key.orgId, ctx.tool, ctx.period, ctx.priceMc, ctx.upstreamCostMc, ctx.paramsSha256, ctx.now, org?.period ?? null) as {
          id: number;
        };
        return { kind: "reserved", reservationId: res.id, remainingMc: lesser(reserved.remaining, org?.remaining ?? null) };
      }
      const now = db.query("SELECT * FROM keys WHERE id = ?").get(ctx.key.id) as KeyRow | null;
      if (now === null || now.revoked_at !== null || (now.expires_at !== null && now.expires_at <= ctx.now)) return { kind: "key_gone" };
      if (now.fail_hour === ctx.hour && now.fail_count >= FAILURES_PER_HOUR) {
        this.appendAudit(recorded(ctx), "refused_rate_limited");
        return { kind: "rate_limited", remainingMc: this.roomOf(now, ctx.period, ctx.now) };
      }
      // The key's own budget is named first when both are short: raising the org's would not help.
      const short = ctx.period < now.period || remainingIn(now, ctx.period) < ctx.priceMc ? "key" : "org";
      const outcome = short === "key" ? "refused_budget" : "refused_org_budget";
      const key = this.countFailure(ctx.key.id, ctx.hour)!;
      const remainingMc = this.roomOf(key, ctx.period, ctx.now);
      const call = recorded(ctx);
      const receipt = this.appendReceipt(call, make, outcome, 0, remainingMc, ctx.period);
      const refused = short === "key" ? this.keyRefusal(key, ctx, receipt.id) : this.orgRefusal(key.org_id, ctx, receipt.id);
      const alerts = refused === null ? 0 : this.alerts.writeNow(alertsOf(refused, () => newId("alrt")));
      return { kind: "no_room", receipt, remainingMc, short, alerts };
    });
  }

  /** The key's scope as a budget refusal saw it (in its period at the call; none when its clock stepped back). */
  private keyRefusal(key: KeyRow, ctx: CallContext, receiptId: string): ScopeOutcome | null {
    if (ctx.period < key.period) return null;
    const charged = this.sql.db.query("SELECT charged_mc FROM spend WHERE key_id = ? AND period = ?").get(key.id, ctx.period) as { charged_mc: number } | null;
    const chargedMc = charged?.charged_mc ?? 0;
    return {
      scope: "key",
      subjectId: key.id,
      orgId: key.org_id,
      keyId: key.id,
      period: ctx.period,
      budgetMc: key.budget_mc,
      thresholds: JSON.parse(key.alert_thresholds) as number[],
      chargedBeforeMc: chargedMc,
      chargedAfterMc: chargedMc,
      cause: "refusal",
      tool: ctx.tool,
      receiptId,
      at: ctx.now,
    };
  }

  /** The org's scope as a refusal for want of its budget saw it (none when the org's period at `now` is behind its row's). */
  private orgRefusal(orgId: string, ctx: CallContext, receiptId: string): ScopeOutcome | null {
    const org = this.orgScope(orgId, ctx.now);
    if (org === null || org.period < org.rowPeriod) return null;
    return {
      ...org.scope,
      keyId: ctx.key.id,
      chargedBeforeMc: org.chargedMc,
      chargedAfterMc: org.chargedMc,
      cause: "refusal",
      tool: ctx.tool,
      receiptId,
      at: ctx.now,
    };
  }

  /** The org's budget, thresholds and settled charges in its period at `now`; null without a budget row. */
  private orgScope(orgId: string, now: number) {
    const row = this.sql.db
      .query(
        `SELECT o.budget_mc, o.period AS row_period, ${orgPeriodAt("o.")} AS period, g.alert_thresholds,
           coalesce((SELECT s.charged_mc FROM org_spend s WHERE s.org_id = o.org_id AND s.period = ${orgPeriodAt("o.")}), 0) AS charged
         FROM org_budgets o JOIN orgs g ON g.id = o.org_id WHERE o.org_id = :org`,
      )
      .get({ org: orgId, ...orgPeriods(now) }) as {
      budget_mc: number | null;
      row_period: string;
      period: string;
      alert_thresholds: string;
      charged: number;
    } | null;
    if (row === null) return null;
    return {
      period: row.period,
      rowPeriod: row.row_period,
      chargedMc: row.charged,
      scope: {
        scope: "org" as const,
        subjectId: orgId,
        orgId,
        period: row.period,
        budgetMc: row.budget_mc,
        thresholds: JSON.parse(row.alert_thresholds) as number[],
      },
    };
  }

  /**
   * A charge counts in the settled charges of the key's period and the org's, and raises the
   * alerts of every threshold it crossed in either, in the charge's own transaction.
   */
  private chargeAlerts(res: ReservationRow, key: KeyRow, receiptId: string, now: number): number {
    const db = this.sql.db;
    const outcomes: ScopeOutcome[] = [];
    const k = db
      .query("UPDATE spend SET charged_mc = charged_mc + ? WHERE key_id = ? AND period = ? RETURNING charged_mc")
      .get(res.price_mc, res.key_id, res.period) as {
      charged_mc: number;
    };
    const common = { keyId: res.key_id, orgId: key.org_id, cause: "charge" as const, tool: res.tool, receiptId, at: now };
    outcomes.push({
      ...common,
      scope: "key",
      subjectId: res.key_id,
      period: res.period,
      budgetMc: key.budget_mc,
      thresholds: JSON.parse(key.alert_thresholds) as number[],
      chargedBeforeMc: k.charged_mc - res.price_mc,
      chargedAfterMc: k.charged_mc,
    });
    if (res.org_period !== null) {
      const o = db
        .query("UPDATE org_spend SET charged_mc = charged_mc + ? WHERE org_id = ? AND period = ? RETURNING charged_mc")
        .get(res.price_mc, res.org_id, res.org_period) as { charged_mc: number };
      const org = db.query("SELECT o.budget_mc, g.alert_thresholds FROM org_budgets o JOIN orgs g ON g.id = o.org_id WHERE o.org_id = ?").get(res.org_id) as {
        budget_mc: number | null;
        alert_thresholds: string;
      };
      outcomes.push({
        ...common,
        scope: "org",
        subjectId: res.org_id,
        period: res.org_period,
        budgetMc: org.budget_mc,
        thresholds: JSON.parse(org.alert_thresholds) as number[],
        chargedBeforeMc: o.charged_mc - res.price_mc,
        chargedAfterMc: o.charged_mc,
      });
    }
    let written = 0;
    for (const outcome of outcomes) written += this.alerts.writeNow(alertsOf(outcome, () => newId("alrt")));
    return written;
  }

  /**
   * Adds a reserved price to the org's spend in its period at `now` (the reservation's UPDATE
   * checked the room): the org's period, its remaining room; null when the org keeps no budget.
   */
  private reserveOrg(orgId: string, priceMc: number, now: number): { period: string; remaining: number | null } | null {
    const db = this.sql.db;
    const org = db
      .query(
        `UPDATE org_budgets SET spent_mc = ${orgSpentAt("")} + :price, period = ${orgPeriodAt("")}
         WHERE org_id = :org RETURNING period, budget_mc - spent_mc AS remaining`,
      )
      .get({ org: orgId, price: priceMc, ...orgPeriods(now) }) as { period: string; remaining: number | null } | null;
    if (org === null) return null;
    db.query(
      `INSERT INTO org_spend (org_id, period, spent_mc) VALUES (?, ?, ?)
       ON CONFLICT (org_id, period) DO UPDATE SET spent_mc = spent_mc + excluded.spent_mc`,
    ).run(orgId, org.period, priceMc);
    return org;
  }

  /**
   * The charge stays, or the price goes back to the period it was reserved from (a reset in
   * between never refunds into the new period). The state change, the money and the receipt
   * commit together.
   */
  settle(settlement: Settlement, make: ReceiptMaker): Promise<SettleResult> {
    return this.commit.run(() => this.settleNow(settlement, make));
  }

  private settleNow({ reservationId, outcome, resultSha256, now, approval }: Settlement, make: ReceiptMaker): SettleResult {
    return this.sql.immediate((): SettleResult => {
      const db = this.sql.db;
      const receiptId = newId("rcpt");
      const res = db
        .query(`UPDATE reservations SET state = 'settled', outcome = ?, receipt_id = ? WHERE id = ? AND state = 'open' RETURNING ${SETTLED_COLUMNS}`)
        .get(outcome, receiptId, reservationId) as ReservationRow | null;
      if (res === null) {
        const prior = db.query("SELECT * FROM reservations WHERE id = ?").get(reservationId) as ReservationRow | null;
        if (prior === null) throw new LedgerConflict("MISSING");
        const receipt = prior.receipt_id === null ? null : (db.query("SELECT * FROM receipts WHERE id = ?").get(prior.receipt_id) as ReceiptRow | null);
        return {
          kind: "already_settled",
          receipt: receipt === null ? null : receiptOf(receipt),
          outcome: prior.outcome,
          remainingMc: this.remainingOf(prior.key_id, prior.period, now),
        };
      }
      const charged = outcome === "charged";
      // The call was counted as failing when it was reserved: a charge takes that back (in the
      // hour it was counted in, if that hour is still the key's); a failure keeps it. A refund
      // lowers the key's spend only while it is still in the reservation's period.
      const key = (
        charged
          ? db
              .query(
                `UPDATE keys SET fail_count = CASE WHEN fail_hour = :hour AND fail_count > 0 THEN fail_count - 1 ELSE fail_count END
                 WHERE id = :id RETURNING ${ROOM_COLUMNS}`,
              )
              .get({ id: res.key_id, hour: hourOf(res.created_at) })
          : db
              .query(`UPDATE keys SET spent_mc = CASE WHEN period = :period THEN spent_mc - :price ELSE spent_mc END WHERE id = :id RETURNING ${ROOM_COLUMNS}`)
              .get({ id: res.key_id, period: res.period, price: res.price_mc })
      ) as KeyRow;
      if (!charged) {
        db.query("UPDATE spend SET spent_mc = spent_mc - ? WHERE key_id = ? AND period = ?").run(res.price_mc, res.key_id, res.period);
        if (res.org_period !== null) this.refundOrg(res.org_id, res.org_period, res.price_mc);
      }
      const remainingMc = this.roomOf(key, periodOf(key.reset, now), now);
      const call: Recorded = {
        keyId: res.key_id,
        orgId: key.org_id,
        tool: res.tool,
        priceMc: res.price_mc,
        upstreamCostMc: res.upstream_cost_mc,
        paramsSha256: res.params_sha256,
        now,
      };
      // A claimed approval binds the decision it was claimed with; an unclaimed one, the decision given (a denial, an expiry).
      const bound = res.approval === null ? (approval ?? null) : (JSON.parse(res.approval) as ApprovalEnvelope);
      const receipt = this.appendReceipt(call, make, outcome, charged ? res.price_mc : 0, remainingMc, res.period, resultSha256, receiptId, bound);
      const alerts = charged ? this.chargeAlerts(res, key, receipt.id, now) : 0;
      return { kind: "settled", receipt, remainingMc, alerts };
    });
  }

  async openReservations(beforeMs: number): Promise<number[]> {
    const rows = this.sql.db
      .query(
        // No ORDER BY id: it would make SQLite walk every reservation ever made in id order
        // instead of the partial index of open ones.
        `SELECT id FROM reservations WHERE state = 'open' AND
           (approval_stage IS NULL AND created_at < :before OR approval_stage = 'claimed' AND claimed_at < :before)`,
      )
      .all({ before: Number.isFinite(beforeMs) ? beforeMs : Number.MAX_SAFE_INTEGER }) as { id: number }[];
    return rows.map((r) => r.id).sort((a, b) => a - b);
  }

  release(reservationId: number, ctx: CallContext, outcome: PlainOutcome): Promise<{ released: boolean; remainingMc: number }> {
    return this.commit.run(() =>
      this.sql.immediate(() => {
        const db = this.sql.db;
        const res = db
          .query("DELETE FROM reservations WHERE id = ? AND state = 'open' AND approval_stage IS NULL RETURNING *")
          .get(reservationId) as ReservationRow | null;
        if (res === null) return { released: false, remainingMc: this.remainingOf(ctx.key.id, ctx.period, ctx.now) };
        // The price goes back to the period it was taken from; the failure the reservation counted goes too unless this refusal counts as one.
        const undo = countsAsFailure(outcome) ? 0 : 1;
        const key = db
          .query(
            `UPDATE keys SET spent_mc = CASE WHEN period = :period THEN spent_mc - :price ELSE spent_mc END,
               fail_count = CASE WHEN fail_hour = :hour AND fail_count >= :undo THEN fail_count - :undo ELSE fail_count END
             WHERE id = :id RETURNING *`,
          )
          .get({ id: res.key_id, period: res.period, price: res.price_mc, hour: hourOf(res.created_at), undo }) as KeyRow;
        db.query("UPDATE spend SET spent_mc = spent_mc - ? WHERE key_id = ? AND period = ?").run(res.price_mc, res.key_id, res.period);
        if (res.org_period !== null) this.refundOrg(res.org_id, res.org_period, res.price_mc);
        this.appendAudit(recorded(ctx), outcome);
        return { released: true, remainingMc: this.roomOf(key, ctx.period, ctx.now) };
      }),
    );
  }

  awaitApproval(reservationId: number, asked: ApprovalAsked): Promise<boolean> {
    return this.commit.run(() =>
      this.sql.immediate(
        () =>
          this.sql.db
            .query(
              `UPDATE reservations SET approval_id = ?, ask_sha256 = ?, approval_expires_at = ?, approval_stage = 'awaiting'
               WHERE id = ? AND state = 'open' AND approval_stage IS NULL`,
            )
            .run(asked.approvalId, asked.askSha256, asked.expiresAt, reservationId).changes === 1,
      ),
    );
  }

  async approval(approvalId: string): Promise<ApprovalHold | null> {
    const row = this.sql.db.query("SELECT * FROM reservations WHERE approval_id = ?").get(approvalId) as ReservationRow | null;
    return row === null ? null : this.holdOf(row);
  }

  claimApproval(reservationId: number, approval: ApprovalEnvelope, now: number): Promise<boolean> {
    return this.commit.run(() =>
      this.sql.immediate(
        () =>
          this.sql.db
            .query(
              `UPDATE reservations SET approval_stage = 'claimed', approval = ?, claimed_at = ?
               WHERE id = ? AND state = 'open' AND approval_stage = 'awaiting'`,
            )
            .run(JSON.stringify(approval), now, reservationId).changes === 1,
      ),
    );
  }

  async approvalsDue(beforeMs: number): Promise<ApprovalHold[]> {
    const rows = this.sql.db
      .query("SELECT * FROM reservations WHERE state = 'open' AND approval_stage = 'awaiting' AND approval_expires_at < ?")
      .all(beforeMs) as ReservationRow[];
    return rows.sort((a, b) => a.id - b.id).map((r) => this.holdOf(r));
  }

  private holdOf(r: ReservationRow): ApprovalHold {
    const receipt = r.receipt_id === null ? null : (this.sql.db.query("SELECT * FROM receipts WHERE id = ?").get(r.receipt_id) as ReceiptRow | null);
    return {
      approvalId: r.approval_id!,
      askSha256: r.ask_sha256!,
      expiresAt: r.approval_expires_at!,
      reservationId: r.id,
      keyId: r.key_id,
      orgId: r.org_id,
      tool: r.tool,
      priceMc: r.price_mc,
      paramsSha256: r.params_sha256,
      period: r.period,
      stage: r.approval_stage!,
      settled: r.state === "settled" ? { outcome: r.outcome!, receipt: receipt === null ? null : receiptOf(receipt) } : null,
    };
  }

  holdResult(held: HeldResult & { now: number; perKey: number }): Promise<void> {
    return this.commit.run(() =>
      this.sql.immediate(() => {
        const db = this.sql.db;
        db.query("DELETE FROM held_results WHERE held_until <= ?").run(held.now);
        db.query("INSERT INTO held_results (receipt_id, key_id, result, held_until) VALUES (?, ?, ?, ?) ON CONFLICT (receipt_id) DO NOTHING").run(
          held.receiptId,
          held.keyId,
          JSON.stringify(held.result),
          held.heldUntil,
        );
        db.query(
          `DELETE FROM held_results WHERE key_id = :key AND receipt_id NOT IN
             (SELECT receipt_id FROM held_results WHERE key_id = :key ORDER BY rowid DESC LIMIT :keep)`,
        ).run({ key: held.keyId, keep: held.perKey });
      }),
    );
  }

  pruneSettled(beforeMs: number, limit: number): Promise<number> {
    return this.commit.run(() =>
      this.sql.immediate(() => {
        const db = this.sql.db;
        const rows = db
          .query(
            `SELECT id, org_id, org_period, created_at, outcome, price_mc FROM reservations
             WHERE state = 'settled' AND approval_id IS NULL AND created_at < ? AND id < (SELECT max(id) FROM reservations)
             ORDER BY created_at LIMIT ?`,
          )
          .all(beforeMs, limit) as Pick<ReservationRow, "id" | "org_id" | "org_period" | "created_at" | "outcome" | "price_mc">[];
        const fold = db.query(
          `INSERT INTO settled_pruned (org_id, org_period, day, settled, charged_mc) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (org_id, org_period, day) DO UPDATE SET settled = settled + excluded.settled, charged_mc = charged_mc + excluded.charged_mc`,
        );
        const remove = db.query("DELETE FROM reservations WHERE id = ?");
        for (const r of rows) {
          fold.run(r.org_id, r.org_period ?? "", dayOf(r.created_at), 1, r.outcome === "charged" ? r.price_mc : 0);
          remove.run(r.id);
        }
        return rows.length;
      }),
    );
  }

  /** What a key can still spend in `period`: its own room, and its org's at `now` when the org keeps a budget. */
  private remainingOf(keyId: string, period: string, now: number): number {
    const key = this.sql.db.query("SELECT * FROM keys WHERE id = ?").get(keyId) as KeyRow | null;
    return key === null ? 0 : this.roomOf(key, period, now);
  }

  /** The lesser of the key row's room in `period` and its org's room at `now`. */
  private roomOf(key: KeyRow, period: string, now: number): number {
    const org = this.sql.db
      .query(`SELECT budget_mc - ${orgSpentAt("")} AS remaining FROM org_budgets WHERE org_id = :org`)
      .get({ org: key.org_id, ...orgPeriods(now) }) as { remaining: number | null } | null;
    return lesser(remainingIn(key, period), org?.remaining ?? null);
  }

  /** A refund goes back to the org period it was reserved from; the org row only while that is still its period. */
  private refundOrg(orgId: string, period: string, priceMc: number): void {
    const db = this.sql.db;
    db.query("UPDATE org_budgets SET spent_mc = CASE WHEN period = :period THEN spent_mc - :price ELSE spent_mc END WHERE org_id = :org").run({
      org: orgId,
      period,
      price: priceMc,
    });
    db.query("UPDATE org_spend SET spent_mc = spent_mc - ? WHERE org_id = ? AND period = ?").run(priceMc, orgId, period);
  }

  /** Counts a failed call of the key in `hour` and returns the key row as it now is. */
  private countFailure(keyId: string, hour: string): KeyRow | null {
    return this.sql.db
      .query("UPDATE keys SET fail_count = CASE WHEN fail_hour = :hour THEN fail_count ELSE 0 END + 1, fail_hour = :hour WHERE id = :id RETURNING *")
      .get({ id: keyId, hour }) as KeyRow | null;
  }

  /** The audit row of a call without a receipt (a receipted call's entry is read out of its receipt). */
  private appendAudit(ctx: Recorded, outcome: PlainOutcome): void {
    this.sql.db
      .query(
        `INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)`,
      )
      .run(
        ctx.now,
        ctx.orgId,
        ctx.keyId,
        ctx.tool,
        outcome,
        statusOf(outcome),
        ctx.priceMc,
        ctx.upstreamCostMc,
        marginOf(outcome, ctx.priceMc, ctx.upstreamCostMc),
      );
  }

  private appendReceipt(
    ctx: Recorded,
    make: ReceiptMaker,
    outcome: ReceiptOutcome,
    amountMc: number,
    remainingMc: number,
    period: string,
    resultSha256: string | null = null,
    receiptId: string = newId("rcpt"),
    approval: ApprovalEnvelope | null = null,
  ): StoredReceipt {
    const { keyId, orgId } = ctx;
    const last = this.sql.db.query("SELECT seq, sha256 FROM receipts WHERE key_id = ? ORDER BY seq DESC LIMIT 1").get(keyId) as {
      seq: number;
      sha256: Uint8Array;
    } | null;
    const seq = (last?.seq ?? 0) + 1;
    const receipt = make({
      receiptId,
      link: { seq, prevSha256: last === null ? null : Buffer.from(last.sha256).toString("hex") },
      keyId,
      orgId,
      tool: ctx.tool,
      outcome,
      httpStatus: statusOf(outcome),
      priceMc: ctx.priceMc,
      amountMc,
      upstreamCostMc: ctx.upstreamCostMc,
      remainingMc,
      period,
      paramsSha256: ctx.paramsSha256,
      resultSha256,
      issuedAt: ctx.now,
      approval,
    });
    // Every other column is read out of the payload (migration 11): what was signed is stored once.
    this.sql.db
      .query("INSERT INTO receipts (payload, signature, sha256, issued_at) VALUES (?, ?, ?, ?)")
      .run(receipt.signed.payload, receipt.signed.signature, Buffer.from(receipt.sha256, "hex"), receipt.issuedAt);
    return receipt;
  }
}

/** The UTC day of `ms`, as settled_pruned groups reservations by it. */
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** The lesser room; null (an unlimited org) leaves the key's. */
const lesser = (keyRoom: number, orgRoom: number | null) => (orgRoom === null ? keyRoom : Math.min(keyRoom, Math.max(0, orgRoom)));

/** What a receipt or an audit row is written from: a call on the clearing path, or a settled reservation. */
type Recorded = Pick<CallContext, "tool" | "priceMc" | "upstreamCostMc" | "paramsSha256" | "now"> & { keyId: string; orgId: string };

const recorded = (ctx: CallContext): Recorded => ({ ...ctx, keyId: ctx.key.id, orgId: ctx.key.orgId });
