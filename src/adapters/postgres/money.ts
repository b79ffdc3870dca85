// The money path in PostgreSQL. Nothing here reads a value and then writes a decision based on
// it without holding the row: the reservation is one statement around one conditional UPDATE of
// the key row (the period reset and the failure count folded in, as in SQLite); a refusal takes
// the key row's lock first; a settlement moves the reservation from open to settled with a
// conditional UPDATE, so it happens once whoever settles (the node, or a sweeper of a dead
// node's calls), and moves the money, appends the receipt and the audit row in one transaction.
//
// READ COMMITTED is enough: an UPDATE that waits for another transaction's lock on the same row
// evaluates its WHERE again on the row as that transaction left it, so two nodes reserving on
// one key can never together pass its budget, and two settlements of one reservation find it
// open once. A receipt takes its place in the key's chain from the key row (receipt_seq,
// receipt_head_sha256) under that same lock, so chains stay unbroken across nodes.
import type { SQL } from "bun";
import { periodOf, type Reset } from "../../core/desk/period.ts";
import { newId } from "../../core/desk/secrets.ts";
import { countsAsFailure, type PlainOutcome, type ReceiptOutcome, type SettleOutcome } from "../../core/desk/outcomes.ts";
import type { ReceiptMaker, StoredReceipt } from "../../core/desk/ports.ts";
import type { ApprovalAsked } from "../../core/desk/records.ts";
import type { ApprovalEnvelope } from "../../core/receipt/index.ts";
import type { ReceiptRow } from "./rows.ts";

/** The node taking the call, as its lease row knows it. */
export type NodeLease = { id: string; epoch: number };

/** One call, as the clearing path knows it when it reserves. */
export type CallInput = {
  keyId: string;
  tool: string;
  priceMc: number;
  upstreamCostMc: number;
  paramsSha256: string;
  now: number;
  /** The UTC hour at `now` (the failure counter's window). */
  hour: string;
  /** The key's period at `now`. */
  period: string;
};

export type ReserveResult =
  | { kind: "reserved"; reservationId: number; remainingMc: number }
  | { kind: "no_room"; receipt: StoredReceipt; remainingMc: number }
  | { kind: "rate_limited"; remainingMc: number }
  | { kind: "key_gone" }
  /** This node's lease has run out (or another process holds its id now): it must not take calls. */
  | { kind: "lease_lost" };

export type SettleResult =
  | { kind: "settled"; receipt: StoredReceipt; remainingMc: number }
  | { kind: "already_settled"; receipt: ReceiptRow | null; outcome: SettleOutcome | null; remainingMc: number };

export class ReservationMissing extends Error {
  override name = "ReservationMissing";
}

/** A bigint column (or sum) as a number of millicents; past 2^53 it is a fault, never rounded. */
export function toSafe(value: bigint | number | string | null): number {
  const n = typeof value === "bigint" ? Number(value) : Number(value ?? 0);
  if (!Number.isSafeInteger(n) || BigInt(n) !== BigInt(value ?? 0)) throw new RangeError(`not a safe integer: ${value}`);
  return n;
}

const big = (n: number) => BigInt(n);

type KeyState = {
  id: string;
  org_id: string;
  budget_mc: bigint;
  spent_mc: bigint;
  period: string;
  reset: Reset;
  revoked_at: bigint | null;
  expires_at: bigint | null;
  fail_hour: string;
  fail_count: number;
};

/** What `key` has spent in `period`: its row holds its latest period's spend only. */
function spentIn(key: { period: string; spent_mc: bigint }, period: string): number {
  return key.period === period ? toSafe(key.spent_mc) : 0;
}

/**
 * The reservation: one statement. The UPDATE decides (budget with the reset folded in, the
 * period never moving back, the failure limit, the key alive, this node's lease alive by the
 * database's clock); when it matches, the same statement adds the price to the period's spend
 * row and records the open reservation with its node.
 */
function reservationStatement(sql: SQL, c: CallInput, node: NodeLease, failuresPerHour: number) {
  return sql`
    WITH k AS (
      UPDATE keys SET
        spent_mc = (CASE WHEN period = ${c.period} THEN spent_mc ELSE 0 END) + ${big(c.priceMc)}::bigint,
        period = ${c.period},
        fail_count = (CASE WHEN fail_hour = ${c.hour} THEN fail_count ELSE 0 END) + 1,
        fail_hour = ${c.hour}
      WHERE id = ${c.keyId} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${big(c.now)}::bigint)
        AND ${c.period} >= period
        AND (CASE WHEN period = ${c.period} THEN spent_mc ELSE 0 END) + ${big(c.priceMc)}::bigint <= budget_mc
        AND (CASE WHEN fail_hour = ${c.hour} THEN fail_count ELSE 0 END) < ${failuresPerHour}::integer
        AND EXISTS (SELECT 1 FROM nodes WHERE nodes.id = ${node.id} AND nodes.epoch = ${big(node.epoch)}::bigint AND nodes.expires_at > clock_timestamp())
      RETURNING id, org_id, budget_mc - spent_mc AS remaining_mc
    ), s AS (
      INSERT INTO spend (key_id, period, spent_mc) SELECT id, ${c.period}, ${big(c.priceMc)}::bigint FROM k
      ON CONFLICT (key_id, period) DO UPDATE SET spent_mc = spend.spent_mc + excluded.spent_mc
    )
    INSERT INTO reservations (key_id, org_id, node_id, tool, period, hour, price_mc, upstream_cost_mc, params_sha256, created_at, state)
    SELECT id, org_id, ${node.id}, ${c.tool}, ${c.period}, ${c.hour}, ${big(c.priceMc)}::bigint, ${big(c.upstreamCostMc)}::bigint,
           ${c.paramsSha256}, ${big(c.now)}::bigint, 'open'
      FROM k
    RETURNING id, (SELECT remaining_mc FROM k) AS remaining_mc`;
}

async function leaseAlive(sql: SQL, node: NodeLease): Promise<boolean> {
  const [row] = await sql`
    SELECT EXISTS (SELECT 1 FROM nodes WHERE id = ${node.id} AND epoch = ${big(node.epoch)}::bigint AND expires_at > clock_timestamp()) AS alive`;
  return row.alive as boolean;
}

type ChainHead = { org_id: string; budget_mc: bigint; spent_mc: bigint; period: string; reset: Reset; receipt_seq: bigint; receipt_head_sha256: string | null };

type ReceiptInput = {
  keyId: string;
  orgId: string;
  tool: string;
  outcome: ReceiptOutcome;
  httpStatus: number;
  priceMc: number;
  amountMc: number;
  upstreamCostMc: number;
  remainingMc: number;
  period: string;
  paramsSha256: string;
  resultSha256: string | null;
  now: number;
  receiptId: string;
  /** The person's decision the receipt binds (version 2), or none. */
  approval?: ApprovalEnvelope | null;
};

/**
 * Signs the receipt at the chain position the key row gave (seq already taken under its lock),
 * then stores it, moves the chain head and writes the audit row: one statement.
 */
async function appendReceipt(tx: SQL, head: ChainHead, r: ReceiptInput, make: ReceiptMaker): Promise<StoredReceipt> {
  const seq = toSafe(head.receipt_seq);
  const receipt = make({
    receiptId: r.receiptId,
    link: { seq, prevSha256: head.receipt_head_sha256 },
    keyId: r.keyId,
    orgId: r.orgId,
    tool: r.tool,
    outcome: r.outcome,
    httpStatus: r.httpStatus,
    priceMc: r.priceMc,
    amountMc: r.amountMc,
    upstreamCostMc: r.upstreamCostMc,
    remainingMc: r.remainingMc,
    period: r.period,
    paramsSha256: r.paramsSha256,
    resultSha256: r.resultSha256,
    issuedAt: r.now,
    approval: r.approval ?? null,
  });
  const margin = r.outcome === "charged" ? r.priceMc - r.upstreamCostMc : 0;
  await tx`
    WITH rc AS (
      INSERT INTO receipts (id, org_id, key_id, seq, issued_at, tool, outcome, period, amount_mc, kid, sha256, envelope)
      VALUES (${receipt.id}, ${r.orgId}, ${r.keyId}, ${big(seq)}::bigint, ${big(r.now)}::bigint, ${r.tool}, ${r.outcome}, ${r.period},
              ${big(r.amountMc)}::bigint, ${receipt.kid}, ${receipt.sha256}, ${receipt.envelope})
    ), hd AS (
      UPDATE keys SET receipt_head_sha256 = ${receipt.sha256} WHERE id = ${r.keyId} AND receipt_seq = ${big(seq)}::bigint
    )
    INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
    VALUES (${big(r.now)}::bigint, ${r.orgId}, ${r.keyId}, ${r.tool}, ${r.outcome}, ${r.httpStatus}::integer, ${big(r.priceMc)}::bigint,
            ${big(r.upstreamCostMc)}::bigint, ${big(margin)}::bigint, ${receipt.id})`;
  return receipt;
}

function auditRow(tx: SQL, c: CallInput, orgId: string, outcome: string, httpStatus: number) {
  return tx`
    INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
    VALUES (${big(c.now)}::bigint, ${orgId}, ${c.keyId}, ${c.tool}, ${outcome}, ${httpStatus}::integer, ${big(c.priceMc)}::bigint,
            ${big(c.upstreamCostMc)}::bigint, 0, NULL)`;
}

/**
 * Reserves the price. The usual answer is one statement; when it does not match, a transaction
 * takes the key row's lock, tries the same statement once more (a refund may have made room in
 * between, and under the lock the answer is final), then says why: the key is gone, this node's
 * lease is lost, the hour's failures are used up (an audit row, no count), or the price does not
 * fit (a failure counted, a refused_budget receipt, an audit row).
 */
export async function reserve(
  sql: SQL,
  c: CallInput,
  node: NodeLease,
  failuresPerHour: number,
  make: ReceiptMaker,
  testOnlyAfterFirstTry?: () => Promise<void>,
): Promise<ReserveResult> {
  const [hit] = await reservationStatement(sql, c, node, failuresPerHour);
  if (hit !== undefined) return { kind: "reserved", reservationId: toSafe(hit.id), remainingMc: toSafe(hit.remaining_mc) };
  await testOnlyAfterFirstTry?.();
  return sql.begin(async (tx): Promise<ReserveResult> => {
    const [key] = (await tx`
      SELECT id, org_id, budget_mc, spent_mc, period, reset, revoked_at, expires_at, fail_hour, fail_count
        FROM keys WHERE id = ${c.keyId} FOR UPDATE`) as KeyState[];
    if (key === undefined || key.revoked_at !== null || (key.expires_at !== null && key.expires_at <= big(c.now))) return { kind: "key_gone" };
    if (!(await leaseAlive(tx, node))) return { kind: "lease_lost" };
    const [retry] = await reservationStatement(tx, c, node, failuresPerHour);
    if (retry !== undefined) return { kind: "reserved", reservationId: toSafe(retry.id), remainingMc: toSafe(retry.remaining_mc) };
    if (key.fail_hour === c.hour && key.fail_count >= failuresPerHour) {
      await auditRow(tx, c, key.org_id, "refused_rate_limited", 429);
      return { kind: "rate_limited", remainingMc: toSafe(key.budget_mc) - spentIn(key, c.period) };
    }
    const [head] = (await tx`
      UPDATE keys SET fail_count = (CASE WHEN fail_hour = ${c.hour} THEN fail_count ELSE 0 END) + 1, fail_hour = ${c.hour},
             receipt_seq = receipt_seq + 1
       WHERE id = ${c.keyId}
      RETURNING org_id, budget_mc, spent_mc, period, reset, receipt_seq, receipt_head_sha256`) as ChainHead[];
    const remainingMc = toSafe(head!.budget_mc) - spentIn(head!, c.period);
    const receipt = await appendReceipt(
      tx,
      head!,
      { ...c, orgId: head!.org_id, outcome: "refused_budget", httpStatus: 402, amountMc: 0, remainingMc, resultSha256: null, receiptId: newId("rcpt") },
      make,
    );
    return { kind: "no_room", receipt, remainingMc };
  });
}

/** 403, the tool is not on the allowlist: a failure counted and a signed receipt; no money moves. */
export async function refuseNotAllowed(sql: SQL, c: CallInput, make: ReceiptMaker): Promise<{ receipt: StoredReceipt; remainingMc: number } | null> {
  return sql.begin(async (tx) => {
    const [head] = (await tx`
      UPDATE keys SET fail_count = (CASE WHEN fail_hour = ${c.hour} THEN fail_count ELSE 0 END) + 1, fail_hour = ${c.hour},
             receipt_seq = receipt_seq + 1
       WHERE id = ${c.keyId}
      RETURNING org_id, budget_mc, spent_mc, period, reset, receipt_seq, receipt_head_sha256`) as ChainHead[];
    if (head === undefined) return null;
    const remainingMc = toSafe(head.budget_mc) - spentIn(head, c.period);
    const receipt = await appendReceipt(
      tx,
      head,
      { ...c, orgId: head.org_id, outcome: "refused_not_allowed", httpStatus: 403, amountMc: 0, remainingMc, resultSha256: null, receiptId: newId("rcpt") },
      make,
    );
    return { receipt, remainingMc };
  });
}

/**
 * A refusal without a receipt (429, 404, 400 ARGS_INVALID): an audit row, and a failure counted
 * except for a 429, which reached nothing. One statement.
 */
export async function recordPlainRefusal(sql: SQL, c: CallInput, outcome: PlainOutcome, httpStatus: number): Promise<void> {
  const counts = countsAsFailure(outcome);
  await sql`
    WITH k AS (
      UPDATE keys SET fail_count = (CASE WHEN fail_hour = ${c.hour} THEN fail_count ELSE 0 END) + 1, fail_hour = ${c.hour}
       WHERE id = ${c.keyId} AND ${counts}::boolean
    )
    INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
    SELECT ${big(c.now)}::bigint, org_id, id, ${c.tool}, ${outcome}, ${httpStatus}::integer, ${big(c.priceMc)}::bigint,
           ${big(c.upstreamCostMc)}::bigint, 0, NULL
      FROM keys WHERE id = ${c.keyId}`;
}

type SettledRow = {
  key_id: string;
  tool: string;
  period: string;
  price_mc: bigint;
  upstream_cost_mc: bigint;
  params_sha256: string;
} & ChainHead;

/**
 * Settles an open reservation: the state change, the money (a refund back to the reservation's
 * own period; a charge takes back the failure counted at reservation, in the hour it was counted
 * in), the chain position, then the signed receipt and the audit row, in one transaction. A
 * reservation already settled (by a sweeper, or by another node's sweep) changes nothing.
 */
export async function settle(
  sql: SQL,
  reservationId: number,
  outcome: SettleOutcome,
  httpStatus: number,
  resultSha256: string | null,
  now: number,
  make: ReceiptMaker,
  approval: ApprovalEnvelope | null = null,
): Promise<SettleResult> {
  const charged = outcome === "charged";
  return sql.begin(async (tx): Promise<SettleResult> => {
    const receiptId = newId("rcpt");
    const [row] = (await tx`
      WITH r AS (
        UPDATE reservations SET state = 'settled', outcome = ${outcome}, receipt_id = ${receiptId}
         WHERE id = ${big(reservationId)}::bigint AND state = 'open'
        RETURNING key_id, tool, period, hour, price_mc, upstream_cost_mc, params_sha256, approval
      ), k AS (
        UPDATE keys SET
          spent_mc = CASE WHEN NOT ${charged}::boolean AND keys.period = r.period THEN keys.spent_mc - r.price_mc ELSE keys.spent_mc END,
          fail_count = CASE WHEN ${charged}::boolean AND keys.fail_hour = r.hour AND keys.fail_count > 0 THEN keys.fail_count - 1 ELSE keys.fail_count END,
          receipt_seq = keys.receipt_seq + 1
          FROM r WHERE keys.id = r.key_id
        RETURNING keys.org_id, keys.budget_mc, keys.spent_mc, keys.period, keys.reset, keys.receipt_seq, keys.receipt_head_sha256
      ), s AS (
        UPDATE spend SET spent_mc = spend.spent_mc - r.price_mc
          FROM r WHERE NOT ${charged}::boolean AND spend.key_id = r.key_id AND spend.period = r.period
      )
      SELECT r.key_id, r.tool, r.period AS reserved_period, r.price_mc, r.upstream_cost_mc, r.params_sha256, r.approval,
             k.org_id, k.budget_mc, k.spent_mc, k.period, k.reset, k.receipt_seq, k.receipt_head_sha256
        FROM r, k`) as (SettledRow & { reserved_period: string; approval: string | null })[];
    if (row === undefined) {
      const [prior] = await tx`SELECT key_id, period, outcome, receipt_id FROM reservations WHERE id = ${big(reservationId)}::bigint`;
      if (prior === undefined) throw new ReservationMissing(`no reservation ${reservationId}`);
      const [receipt] =
        prior.receipt_id === null
          ? []
          : await tx`SELECT id, org_id, key_id, seq, issued_at, tool, outcome, period, amount_mc, kid, sha256, envelope FROM receipts WHERE id = ${prior.receipt_id}`;
      return { kind: "already_settled", receipt: receipt ?? null, outcome: prior.outcome, remainingMc: await remainingOf(tx, prior.key_id, prior.period) };
    }
    const priceMc = toSafe(row.price_mc);
    const remainingMc = toSafe(row.budget_mc) - spentIn(row, periodOf(row.reset, now));
    const receipt = await appendReceipt(
      tx,
      row,
      {
        keyId: row.key_id,
        orgId: row.org_id,
        tool: row.tool,
        outcome,
        httpStatus,
        priceMc,
        amountMc: charged ? priceMc : 0,
        upstreamCostMc: toSafe(row.upstream_cost_mc),
        remainingMc,
        period: row.reserved_period,
        paramsSha256: row.params_sha256,
        resultSha256,
        now,
        receiptId,
        // A claimed approval binds the decision it was claimed with; an unclaimed one, the decision given (a denial, an expiry).
        approval: row.approval === null ? approval : (JSON.parse(row.approval) as ApprovalEnvelope),
      },
      make,
    );
    return { kind: "settled", receipt, remainingMc };
  });
}

/** The room a key has left in `period` (a key not used since its reset has all of it). */
export async function remainingOf(sql: SQL, keyId: string, period: string): Promise<number> {
  const [row] = await sql`SELECT budget_mc - (CASE WHEN period = ${period} THEN spent_mc ELSE 0 END) AS remaining FROM keys WHERE id = ${keyId}`;
  return row === undefined ? 0 : toSafe(row.remaining);
}

/**
 * Undoes an open reservation whose spend ask was never recorded (approval.ts): the row goes, the
 * price back to its period, and the failure it counted goes too unless `outcome` counts as one;
 * an audit row records `outcome`. Null when it is no longer open and unasked (nothing changed).
 */
export async function release(
  sql: SQL,
  reservationId: number,
  c: CallInput,
  outcome: PlainOutcome,
  httpStatus: number,
): Promise<{ remainingMc: number } | null> {
  const undo = countsAsFailure(outcome) ? 0 : 1;
  return sql.begin(async (tx) => {
    const [row] = await tx`
      WITH r AS (
        DELETE FROM reservations WHERE id = ${big(reservationId)}::bigint AND state = 'open' AND approval_stage IS NULL
        RETURNING key_id, org_id, period, hour, price_mc
      ), k AS (
        UPDATE keys SET
          spent_mc = CASE WHEN keys.period = r.period THEN keys.spent_mc - r.price_mc ELSE keys.spent_mc END,
          fail_count = CASE WHEN keys.fail_hour = r.hour AND keys.fail_count >= ${undo}::integer THEN keys.fail_count - ${undo}::integer ELSE keys.fail_count END
          FROM r WHERE keys.id = r.key_id
        RETURNING keys.budget_mc, keys.spent_mc, keys.period
      ), s AS (
        UPDATE spend SET spent_mc = spend.spent_mc - r.price_mc FROM r WHERE spend.key_id = r.key_id AND spend.period = r.period
      )
      SELECT r.org_id, k.budget_mc, k.spent_mc, k.period FROM r, k`;
    if (row === undefined) return null;
    await auditRow(tx, c, row.org_id, outcome, httpStatus);
    return { remainingMc: toSafe(row.budget_mc) - spentIn(row, c.period) };
  });
}

/** Records the spend ask sent for an open, unasked reservation; false when it is not one (nothing changed). */
export async function awaitApproval(sql: SQL, reservationId: number, asked: ApprovalAsked): Promise<boolean> {
  const rows = await sql`
    UPDATE reservations SET approval_id = ${asked.approvalId}, ask_sha256 = ${asked.askSha256},
           approval_expires_at = ${big(asked.expiresAt)}::bigint, approval_stage = 'awaiting'
     WHERE id = ${big(reservationId)}::bigint AND state = 'open' AND approval_stage IS NULL
    RETURNING id`;
  return rows.length === 1;
}

/**
 * The one use of an approval: an open reservation awaiting a decision becomes claimed, on the
 * node that claimed it (its sweep and its lease now answer for the call), with the decision it
 * will bind and `now` as the start of its call. True for exactly one caller, on any node.
 */
export async function claimApproval(sql: SQL, reservationId: number, approval: ApprovalEnvelope, now: number, nodeId: string): Promise<boolean> {
  const rows = await sql`
    UPDATE reservations SET approval_stage = 'claimed', approval = ${JSON.stringify(approval)}, claimed_at = ${big(now)}::bigint, node_id = ${nodeId}
     WHERE id = ${big(reservationId)}::bigint AND state = 'open' AND approval_stage = 'awaiting'
    RETURNING id`;
  return rows.length === 1;
}

export type HoldRow = {
  id: bigint;
  key_id: string;
  org_id: string;
  tool: string;
  period: string;
  price_mc: bigint;
  params_sha256: string;
  state: "open" | "settled";
  outcome: SettleOutcome | null;
  receipt_id: string | null;
  approval_id: string;
  ask_sha256: string;
  approval_expires_at: bigint;
  approval_stage: "awaiting" | "claimed";
};

const HOLD_COLUMNS =
  "id, key_id, org_id, tool, period, price_mc, params_sha256, state, outcome, receipt_id, approval_id, ask_sha256, approval_expires_at, approval_stage";

/** The reservation an approval id names, or undefined. */
export async function holdRow(sql: SQL, approvalId: string): Promise<HoldRow | undefined> {
  const [row] = await sql.unsafe(`SELECT ${HOLD_COLUMNS} FROM reservations WHERE approval_id = $1`, [approvalId]);
  return row as HoldRow | undefined;
}

/** Open reservations still awaiting a decision whose ask expired before `beforeMs`, on any node. */
export async function holdsDue(sql: SQL, beforeMs: number, limit: number): Promise<HoldRow[]> {
  return (await sql.unsafe(
    `SELECT ${HOLD_COLUMNS} FROM reservations WHERE state = 'open' AND approval_stage = 'awaiting' AND approval_expires_at < $1 ORDER BY id LIMIT $2`,
    [BigInt(Math.min(beforeMs, Number.MAX_SAFE_INTEGER)), limit],
  )) as HoldRow[];
}
