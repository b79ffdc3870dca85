// The money path of the port (MoneyLedger) on PostgreSQL: the statements of money.ts run under
// this node's lease, each through the guarded runner (db.ts). A node that does not hold its lease
// takes no call (LedgerUnavailable); it still settles the calls it has in flight, since a
// settlement happens once whoever makes it (the node, or a live node sweeping its calls).
import { FAILURES_PER_HOUR } from "../../core/desk/limits.ts";
import { type PlainOutcome, statusOf } from "../../core/desk/outcomes.ts";
import {
  type CallContext,
  LedgerConflict,
  LedgerUnavailable,
  type MoneyLedger,
  type ReceiptMaker,
  type ReserveResult,
  type Settlement,
  type SettleResult,
  type StoredReceipt,
} from "../../core/desk/ports.ts";
import type { ApprovalAsked, ApprovalHold, HeldResult } from "../../core/desk/records.ts";
import type { ApprovalEnvelope } from "../../core/receipt/index.ts";
import type { Db } from "./db.ts";
import { abandonedByDeadNodes, openReservationsOf } from "./leases.ts";
import {
  awaitApproval,
  type CallInput,
  claimApproval,
  type HoldRow,
  holdRow,
  holdsDue,
  type NodeLease,
  ReservationMissing,
  recordPlainRefusal,
  refuseNotAllowed,
  release,
  remainingOf,
  reserve,
  settle,
  toSafe,
} from "./money.ts";
import type { NodeSession } from "./node.ts";
import { RECEIPT_COLUMNS, receiptOf } from "./rows.ts";

/** Reservations one sweep lists at most; the next sweep takes the rest. */
const SWEEP_BATCH = 1_000;

const inputOf = (ctx: CallContext): CallInput => ({
  keyId: ctx.key.id,
  tool: ctx.tool,
  priceMc: ctx.priceMc,
  upstreamCostMc: ctx.upstreamCostMc,
  paramsSha256: ctx.paramsSha256,
  now: ctx.now,
  hour: ctx.hour,
  period: ctx.period,
});

export class PostgresMoney implements MoneyLedger {
  constructor(
    private readonly db: Db,
    private readonly node: NodeSession | null,
  ) {}

  /** The lease this node takes calls under, or LedgerUnavailable. */
  private lease(): NodeLease {
    const lease = this.node?.lease() ?? null;
    if (lease === null) throw new LedgerUnavailable(this.node === null ? "no node" : "lease not held");
    return lease;
  }

  async recordPlainRefusal(ctx: CallContext, outcome: PlainOutcome): Promise<void> {
    this.lease();
    await this.db.run((sql) => recordPlainRefusal(sql, inputOf(ctx), outcome, statusOf(outcome)));
  }

  async refuseNotAllowed(ctx: CallContext, make: ReceiptMaker): Promise<{ receipt: StoredReceipt; remainingMc: number }> {
    this.lease();
    const r = await this.db.run((sql) => refuseNotAllowed(sql, inputOf(ctx), make));
    if (r === null) throw new LedgerConflict("MISSING");
    return r;
  }

  async reserve(ctx: CallContext, make: ReceiptMaker): Promise<ReserveResult> {
    const lease = this.lease();
    const r = await this.db.run((sql) => reserve(sql, inputOf(ctx), lease, FAILURES_PER_HOUR, make));
    if (r.kind === "lease_lost") {
      this.node?.doubt();
      throw new LedgerUnavailable("lease lost");
    }
    return r;
  }

  async settle(s: Settlement, make: ReceiptMaker): Promise<SettleResult> {
    try {
      const r = await this.db.run((sql) => settle(sql, s.reservationId, s.outcome, statusOf(s.outcome), s.resultSha256, s.now, make, s.approval ?? null));
      if (r.kind === "settled") return r;
      return { kind: "already_settled", receipt: r.receipt === null ? null : receiptOf(r.receipt), outcome: r.outcome, remainingMc: r.remainingMc };
    } catch (err) {
      if (err instanceof ReservationMissing) throw new LedgerConflict("MISSING");
      throw err;
    }
  }

  /** This node's own open reservations taken before `beforeMs`, and every open one of a node whose lease ran out. */
  async openReservations(beforeMs: number): Promise<number[]> {
    if (this.node === null) return [];
    const id = this.node.id;
    return this.db.run(async (sql) => {
      const [own, dead] = await Promise.all([openReservationsOf(sql, id, beforeMs, SWEEP_BATCH), abandonedByDeadNodes(sql, SWEEP_BATCH)]);
      return [...new Set([...own, ...dead])].sort((a, b) => a - b);
    });
  }

  async release(reservationId: number, ctx: CallContext, outcome: PlainOutcome): Promise<{ released: boolean; remainingMc: number }> {
    const r = await this.db.run((sql) => release(sql, reservationId, inputOf(ctx), outcome, statusOf(outcome)));
    if (r !== null) return { released: true, remainingMc: r.remainingMc };
    return { released: false, remainingMc: await this.db.run((sql) => remainingOf(sql, ctx.key.id, ctx.period, ctx.now)) };
  }

  awaitApproval(reservationId: number, asked: ApprovalAsked): Promise<boolean> {
    return this.db.run((sql) => awaitApproval(sql, reservationId, asked));
  }

  async approval(approvalId: string): Promise<ApprovalHold | null> {
    const row = await this.db.run((sql) => holdRow(sql, approvalId));
    return row === undefined ? null : this.holdOf(row);
  }

  /** The claim moves the call onto this node: its lease answers for it from now on. */
  claimApproval(reservationId: number, approval: ApprovalEnvelope, now: number): Promise<boolean> {
    const lease = this.lease();
    return this.db.run((sql) => claimApproval(sql, reservationId, approval, now, lease.id));
  }

  async approvalsDue(beforeMs: number): Promise<ApprovalHold[]> {
    const rows = await this.db.run((sql) => holdsDue(sql, beforeMs, SWEEP_BATCH));
    return Promise.all(rows.map((r) => this.holdOf(r)));
  }

  private async holdOf(r: HoldRow): Promise<ApprovalHold> {
    const receipt =
      r.receipt_id === null ? undefined : (await this.db.run((sql) => sql.unsafe(`SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE id = $1`, [r.receipt_id])))[0];
    return {
      approvalId: r.approval_id,
      askSha256: r.ask_sha256,
      expiresAt: toSafe(r.approval_expires_at),
      reservationId: toSafe(r.id),
      keyId: r.key_id,
      orgId: r.org_id,
      tool: r.tool,
      priceMc: toSafe(r.price_mc),
      paramsSha256: r.params_sha256,
      period: r.period,
      stage: r.approval_stage,
      settled: r.state === "settled" ? { outcome: r.outcome!, receipt: receipt === undefined ? null : receiptOf(receipt) } : null,
    };
  }

  /**
   * One statement: the batch deleted (rows another node is pruning are skipped), folded into
   * settled_pruned by org, org period and UTC day, committed together.
   */
  async pruneSettled(beforeMs: number, limit: number): Promise<number> {
    const [row] = await this.db.run(
      (sql) => sql`
        WITH gone AS (
          DELETE FROM reservations WHERE id IN (
            SELECT id FROM reservations WHERE state = 'settled' AND approval_id IS NULL AND created_at < ${BigInt(beforeMs)}::bigint
               AND id < (SELECT max(id) FROM reservations)
             ORDER BY created_at LIMIT ${limit}::integer FOR UPDATE SKIP LOCKED)
          RETURNING org_id, org_period, created_at, outcome, price_mc
        ), folded AS (
          INSERT INTO settled_pruned (org_id, org_period, day, settled, charged_mc)
          SELECT org_id, coalesce(org_period, ''), to_char(to_timestamp(created_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
                 count(*), coalesce(sum(price_mc) FILTER (WHERE outcome = 'charged'), 0)
            FROM gone GROUP BY 1, 2, 3
          ON CONFLICT (org_id, org_period, day) DO UPDATE
            SET settled = settled_pruned.settled + excluded.settled, charged_mc = settled_pruned.charged_mc + excluded.charged_mc
          RETURNING 1
        )
        SELECT (SELECT count(*) FROM gone)::integer AS n, (SELECT count(*) FROM folded)::integer AS folded`,
    );
    return row.n as number;
  }

  async holdResult(held: HeldResult & { now: number; perKey: number }): Promise<void> {
    await this.db.tx(async (tx) => {
      await tx`DELETE FROM held_results WHERE held_until <= ${BigInt(held.now)}::bigint`;
      await tx`
        INSERT INTO held_results (receipt_id, key_id, result, held_until)
        VALUES (${held.receiptId}, ${held.keyId}, ${JSON.stringify(held.result)}, ${BigInt(held.heldUntil)}::bigint)
        ON CONFLICT (receipt_id) DO NOTHING`;
      // The key's own rows first (MATERIALIZED): left to itself, the planner may walk the n index
      // from the newest row of every key until it finds this key's few.
      await tx`
        WITH mine AS MATERIALIZED (SELECT n FROM held_results WHERE key_id = ${held.keyId})
        DELETE FROM held_results WHERE key_id = ${held.keyId} AND n NOT IN
          (SELECT n FROM mine ORDER BY n DESC LIMIT ${held.perKey}::integer)`;
    });
  }
}
