// The money path in PostgreSQL. Nothing here reads a value and then writes a decision based on
// it without holding the row: the reservation is one statement around one conditional UPDATE of
// the key row (the period reset and the failure count folded in, as in SQLite); a refusal takes
// the key row's lock first; a settlement moves the reservation from open to settled with a
// conditional UPDATE, so it happens once whoever settles (the node, or a sweeper of a dead
// node's calls), and moves the money and appends the receipt in one transaction. A call with a
// receipt writes no audit row: its audit entry is read out of the receipt (core/desk/audit-log.ts).
//
// READ COMMITTED is enough: an UPDATE that waits for another transaction's lock on the same row
// evaluates its WHERE again on the row as that transaction left it, so two nodes reserving on
// one key can never together pass its budget, and two settlements of one reservation find it
// open once. A receipt takes its place in the key's chain from the key row (receipt_seq,
// receipt_head_sha256) under that same lock, so chains stay unbroken across nodes.
//
// An organization's budget is checked in the same reservation statement: it locks the org's
// budget row first (FOR UPDATE, which under READ COMMITTED returns the row as the last committed
// writer left it), the key's UPDATE matches only when the org has room too, and the org's spend
// is written from the key's result, so no interleaving of calls across an org's keys, on any
// number of nodes, passes the org's budget; its row's CHECK refuses it whatever else writes.
// Every transaction that touches both takes the org row before the key row, so none deadlock.
import type { SQL } from "bun";
import { periodOf, type Reset } from "../../core/desk/period.ts";
import { newId } from "../../core/desk/secrets.ts";
import { countsAsFailure, type PlainOutcome, type ReceiptOutcome, type SettleOutcome } from "../../core/desk/outcomes.ts";
import type { ReceiptMaker, StoredReceipt } from "../../core/desk/ports.ts";
import type { ApprovalAsked } from "../../core/desk/records.ts";
import type { ScopeOutcome } from "../../core/finance/alerts.ts";
import type { ApprovalEnvelope } from "../../core/receipt/index.ts";
import { lesser, orgPeriodsAt, orgRoom, orgScopeAt, writeAlerts } from "./org-money.ts";
import { type CommitWith, pipelinedTransaction } from "./pipelined.ts";
import { percentagesOf, RECEIPT_COLUMNS, type ReceiptRow } from "./rows.ts";

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
  | { kind: "no_room"; receipt: StoredReceipt; remainingMc: number; short: "key" | "org"; alerts: number }
  | { kind: "rate_limited"; remainingMc: number }
  | { kind: "key_gone" }
  /** This node's lease has run out (or another process holds its id now): it must not take calls. */
  | { kind: "lease_lost" };

export type SettleResult =
  | { kind: "settled"; receipt: StoredReceipt; remainingMc: number; alerts: number }
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
  alert_thresholds: ArrayLike<number>;
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
  const { daily, monthly } = orgPeriodsAt(c.now);
  return sql`
    WITH o AS (
      SELECT org_id, budget_mc, period, spent_mc,
             (CASE reset WHEN 'daily' THEN ${daily} WHEN 'monthly' THEN ${monthly} ELSE 'none' END) COLLATE "C" AS at_period
        FROM org_budgets WHERE org_id = (SELECT org_id FROM keys WHERE id = ${c.keyId})
        FOR UPDATE
    ), k AS (
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
        AND NOT EXISTS (SELECT 1 FROM o WHERE o.at_period < o.period
          OR (o.budget_mc IS NOT NULL AND (CASE WHEN o.period = o.at_period THEN o.spent_mc ELSE 0 END) + ${big(c.priceMc)}::bigint > o.budget_mc))
      RETURNING id, org_id, budget_mc - spent_mc AS remaining_mc
    ), s AS (
      INSERT INTO spend (key_id, period, spent_mc) SELECT id, ${c.period}, ${big(c.priceMc)}::bigint FROM k
      ON CONFLICT (key_id, period) DO UPDATE SET spent_mc = spend.spent_mc + excluded.spent_mc
    ), ob AS (
      UPDATE org_budgets SET
        spent_mc = (CASE WHEN org_budgets.period = o.at_period THEN org_budgets.spent_mc ELSE 0 END) + ${big(c.priceMc)}::bigint,
        period = o.at_period
        FROM o, k WHERE org_budgets.org_id = o.org_id
      RETURNING org_budgets.budget_mc - org_budgets.spent_mc AS remaining_mc
    ), os AS (
      INSERT INTO org_spend (org_id, period, spent_mc) SELECT o.org_id, o.at_period, ${big(c.priceMc)}::bigint FROM o, k
      ON CONFLICT (org_id, period) DO UPDATE SET spent_mc = org_spend.spent_mc + excluded.spent_mc
    )
    INSERT INTO reservations (key_id, org_id, node_id, tool, period, hour, price_mc, upstream_cost_mc, params_sha256, created_at, state, org_period)
    SELECT id, org_id, ${node.id}, ${c.tool}, ${c.period}, ${c.hour}, ${big(c.priceMc)}::bigint, ${big(c.upstreamCostMc)}::bigint,
           ${c.paramsSha256}, ${big(c.now)}::bigint, 'open', (SELECT at_period FROM o)
      FROM k
    RETURNING id, (SELECT remaining_mc FROM k) AS remaining_mc, (SELECT remaining_mc FROM ob) AS org_remaining_mc`;
}

async function leaseAlive(sql: SQL, node: NodeLease): Promise<boolean> {
  const [row] = await sql`
    SELECT EXISTS (SELECT 1 FROM nodes WHERE id = ${node.id} AND epoch = ${big(node.epoch)}::bigint AND expires_at > clock_timestamp()) AS alive`;
  return row.alive as boolean;
}

type ChainHead = {
  org_id: string;
  budget_mc: bigint;
  spent_mc: bigint;
  period: string;
  reset: Reset;
  receipt_seq: bigint;
  receipt_head_sha256: string | null;
  alert_thresholds: ArrayLike<number>;
};

/** A reservation statement's hit: the lesser of the key's room and its org's. */
const reservedOf = (hit: Record<string, unknown>): ReserveResult => ({
  kind: "reserved",
  reservationId: toSafe(hit.id as bigint),
  remainingMc: lesser(toSafe(hit.remaining_mc as bigint), hit.org_remaining_mc === null ? null : toSafe(hit.org_remaining_mc as bigint)),
});

/** The key's room in `period` (its row as `head` holds it), and its org's at `now`. */
async function roomOf(sql: SQL, head: { org_id: string; budget_mc: bigint; spent_mc: bigint; period: string }, period: string, now: number) {
  return lesser(toSafe(head.budget_mc) - spentIn(head, period), await orgRoom(sql, head.org_id, now));
}

/** Takes the lock on the budget row of `keyId`'s org first, as the reservation statement does (none without a budget row). */
function lockOrgOfKey(tx: SQL, keyId: string) {
  return tx`SELECT org_id FROM org_budgets WHERE org_id = (SELECT org_id FROM keys WHERE id = ${keyId}) FOR UPDATE`;
}

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
 * then stores it and moves the chain head: one statement.
 */
async function appendReceipt(tx: SQL, head: ChainHead, r: ReceiptInput, make: ReceiptMaker, commitWith?: CommitWith): Promise<StoredReceipt> {
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
  const append = tx`
    WITH rc AS (
      INSERT INTO receipts (id, org_id, key_id, seq, issued_at, outcome, period, amount_mc, payload, signature)
      VALUES (${receipt.id}, ${r.orgId}, ${r.keyId}, ${big(seq)}::bigint, ${big(receipt.issuedAt)}::bigint, ${r.outcome}, ${r.period},
              ${big(r.amountMc)}::bigint, ${receipt.signed.payload}, ${receipt.signed.signature})
    )
    UPDATE keys SET receipt_head_sha256 = ${receipt.sha256} WHERE id = ${r.keyId} AND receipt_seq = ${big(seq)}::bigint`;
  await (commitWith === undefined ? append : commitWith(append));
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
 * fit (a failure counted, a refused_budget receipt).
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
  if (hit !== undefined) return reservedOf(hit);
  await testOnlyAfterFirstTry?.();
  return sql.begin(async (tx): Promise<ReserveResult> => {
    await lockOrgOfKey(tx, c.keyId);
    const [key] = (await tx`
      SELECT id, org_id, budget_mc, spent_mc, period, reset, revoked_at, expires_at, fail_hour, fail_count, alert_thresholds
        FROM keys WHERE id = ${c.keyId} FOR UPDATE`) as KeyState[];
    if (key === undefined || key.revoked_at !== null || (key.expires_at !== null && key.expires_at <= big(c.now))) return { kind: "key_gone" };
    if (!(await leaseAlive(tx, node))) return { kind: "lease_lost" };
    const [retry] = await reservationStatement(tx, c, node, failuresPerHour);
    if (retry !== undefined) return reservedOf(retry);
    if (key.fail_hour === c.hour && key.fail_count >= failuresPerHour) {
      await auditRow(tx, c, key.org_id, "refused_rate_limited", 429);
      return { kind: "rate_limited", remainingMc: await roomOf(tx, key, c.period, c.now) };
    }
    // The key's own budget is named first when both are short: raising the org's would not help.
    const short = c.period < key.period || toSafe(key.budget_mc) - spentIn(key, c.period) < c.priceMc ? "key" : "org";
    const [head] = (await tx`
      UPDATE keys SET fail_count = (CASE WHEN fail_hour = ${c.hour} THEN fail_count ELSE 0 END) + 1, fail_hour = ${c.hour},
             receipt_seq = receipt_seq + 1
       WHERE id = ${c.keyId}
      RETURNING org_id, budget_mc, spent_mc, period, reset, receipt_seq, receipt_head_sha256, alert_thresholds`) as ChainHead[];
    const remainingMc = await roomOf(tx, head!, c.period, c.now);
    const outcome = short === "key" ? "refused_budget" : "refused_org_budget";
    const receiptId = newId("rcpt");
    const receipt = await appendReceipt(
      tx,
      head!,
      { ...c, orgId: head!.org_id, outcome, httpStatus: 402, amountMc: 0, remainingMc, resultSha256: null, receiptId },
      make,
    );
    const refused = short === "key" ? await keyRefusal(tx, key, c, receipt.id) : await orgRefusal(tx, key.org_id, c, receipt.id);
    const alerts = refused === null ? 0 : await writeAlerts(tx, [refused]);
    return { kind: "no_room", receipt, remainingMc, short, alerts };
  });
}

/** The key's scope as a budget refusal saw it (in its period at the call; none when its clock stepped back). */
async function keyRefusal(tx: SQL, key: KeyState, c: CallInput, receiptId: string): Promise<ScopeOutcome | null> {
  if (c.period < key.period) return null;
  const [row] = await tx`SELECT charged_mc FROM spend WHERE key_id = ${key.id} AND period = ${c.period}`;
  const chargedMc = row === undefined ? 0 : toSafe(row.charged_mc);
  return {
    scope: "key",
    subjectId: key.id,
    orgId: key.org_id,
    keyId: key.id,
    period: c.period,
    budgetMc: toSafe(key.budget_mc),
    thresholds: percentagesOf(key.alert_thresholds),
    chargedBeforeMc: chargedMc,
    chargedAfterMc: chargedMc,
    cause: "refusal",
    tool: c.tool,
    receiptId,
    at: c.now,
  };
}

/** The org's scope as a refusal for want of its budget saw it (none when the org's period at `now` is behind its row's). */
async function orgRefusal(tx: SQL, orgId: string, c: CallInput, receiptId: string): Promise<ScopeOutcome | null> {
  const org = await orgScopeAt(tx, orgId, c.now);
  if (org === null || org.period < org.rowPeriod) return null;
  return {
    scope: "org",
    subjectId: orgId,
    orgId,
    keyId: c.keyId,
    period: org.period,
    budgetMc: org.budgetMc,
    thresholds: org.thresholds,
    chargedBeforeMc: org.chargedMc,
    chargedAfterMc: org.chargedMc,
    cause: "refusal",
    tool: c.tool,
    receiptId,
    at: c.now,
  };
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
    const remainingMc = await roomOf(tx, head, c.period, c.now);
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
 * in), the chain position, then the signed receipt, in one transaction. A
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
  const { daily, monthly } = orgPeriodsAt(now);
  return pipelinedTransaction(sql, async (tx, commitWith): Promise<SettleResult> => {
    const receiptId = newId("rcpt");
    // A refund gives back to the org's row: its lock comes first, as in the reservation.
    if (!charged) {
      await tx`
        SELECT o.org_id FROM org_budgets o JOIN reservations v ON v.org_id = o.org_id
         WHERE v.id = ${big(reservationId)}::bigint AND v.state = 'open' AND v.org_period IS NOT NULL
        FOR UPDATE OF o`;
    }
    const [row] = (await tx`
      WITH r AS (
        UPDATE reservations SET state = 'settled', outcome = ${outcome}, receipt_id = ${receiptId}
         WHERE id = ${big(reservationId)}::bigint AND state = 'open'
        RETURNING key_id, org_id AS reserved_org_id, org_period, tool, period, hour, price_mc, upstream_cost_mc, params_sha256, approval
      ), k AS (
        UPDATE keys SET
          spent_mc = CASE WHEN NOT ${charged}::boolean AND keys.period = r.period THEN keys.spent_mc - r.price_mc ELSE keys.spent_mc END,
          fail_count = CASE WHEN ${charged}::boolean AND keys.fail_hour = r.hour AND keys.fail_count > 0 THEN keys.fail_count - 1 ELSE keys.fail_count END,
          receipt_seq = keys.receipt_seq + 1
          FROM r WHERE keys.id = r.key_id
        RETURNING keys.org_id, keys.budget_mc, keys.spent_mc, keys.period, keys.reset, keys.receipt_seq, keys.receipt_head_sha256, keys.alert_thresholds
      ), s AS (
        UPDATE spend SET spent_mc = spend.spent_mc - (CASE WHEN ${charged}::boolean THEN 0 ELSE r.price_mc END),
                         charged_mc = spend.charged_mc + (CASE WHEN ${charged}::boolean THEN r.price_mc ELSE 0 END)
          FROM r WHERE spend.key_id = r.key_id AND spend.period = r.period
        RETURNING spend.charged_mc
      ), ob AS (
        UPDATE org_budgets SET spent_mc = CASE WHEN org_budgets.period = r.org_period THEN org_budgets.spent_mc - r.price_mc ELSE org_budgets.spent_mc END
          FROM r WHERE NOT ${charged}::boolean AND org_budgets.org_id = r.reserved_org_id AND r.org_period IS NOT NULL
        RETURNING org_budgets.org_id, org_budgets.budget_mc - (CASE WHEN org_budgets.period = (CASE org_budgets.reset WHEN 'daily' THEN ${daily} WHEN 'monthly' THEN ${monthly} ELSE 'none' END)
                                THEN org_budgets.spent_mc ELSE 0 END) AS remaining_mc
      ), os AS (
        UPDATE org_spend SET spent_mc = org_spend.spent_mc - (CASE WHEN ${charged}::boolean THEN 0 ELSE r.price_mc END),
                             charged_mc = org_spend.charged_mc + (CASE WHEN ${charged}::boolean THEN r.price_mc ELSE 0 END)
          FROM r WHERE org_spend.org_id = r.reserved_org_id AND org_spend.period = r.org_period
        RETURNING org_spend.charged_mc
      )
      SELECT r.key_id, r.tool, r.period AS reserved_period, r.price_mc, r.upstream_cost_mc, r.params_sha256, r.approval,
             r.reserved_org_id, r.org_period,
             k.org_id, k.budget_mc, k.spent_mc, k.period, k.reset, k.receipt_seq, k.receipt_head_sha256, k.alert_thresholds,
             (SELECT charged_mc FROM s) AS key_charged_mc, (SELECT charged_mc FROM os) AS org_charged_mc,
             CASE WHEN EXISTS (SELECT 1 FROM ob WHERE ob.org_id = k.org_id) THEN (SELECT remaining_mc FROM ob WHERE ob.org_id = k.org_id)
                  ELSE (SELECT b.budget_mc - (CASE WHEN b.period = (CASE b.reset WHEN 'daily' THEN ${daily} WHEN 'monthly' THEN ${monthly} ELSE 'none' END)
                                THEN b.spent_mc ELSE 0 END) FROM org_budgets b WHERE b.org_id = k.org_id) END AS org_remaining_mc
        FROM r, k`) as (SettledRow & {
      reserved_period: string;
      approval: string | null;
      reserved_org_id: string;
      org_period: string | null;
      key_charged_mc: bigint | null;
      org_charged_mc: bigint | null;
      org_remaining_mc: bigint | null;
    })[];
    if (row === undefined) {
      const [prior] = await tx`SELECT key_id, period, outcome, receipt_id FROM reservations WHERE id = ${big(reservationId)}::bigint`;
      if (prior === undefined) throw new ReservationMissing(`no reservation ${reservationId}`);
      const [receipt] = prior.receipt_id === null ? [] : await tx.unsafe(`SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE id = $1`, [prior.receipt_id]);
      return { kind: "already_settled", receipt: receipt ?? null, outcome: prior.outcome, remainingMc: await remainingOf(tx, prior.key_id, prior.period, now) };
    }
    const priceMc = toSafe(row.price_mc);
    const keyRoom = toSafe(row.budget_mc) - spentIn(row, periodOf(row.reset, now));
    const remainingMc = lesser(keyRoom, row.org_remaining_mc === null ? null : toSafe(row.org_remaining_mc));
    // The alerts name the receipt by its id: they are written first, so the receipt's statement is the last and carries the COMMIT.
    const alerts = charged ? await writeAlerts(tx, await chargeOutcomes(tx, row, priceMc, receiptId, now)) : 0;
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
      commitWith,
    );
    return { kind: "settled", receipt, remainingMc, alerts };
  });
}

/** A charge as each budget it counted in saw it: the key's period, and the org's when the reservation drew on one. */
async function chargeOutcomes(
  tx: SQL,
  row: SettledRow & {
    reserved_period: string;
    reserved_org_id: string;
    org_period: string | null;
    key_charged_mc: bigint | null;
    org_charged_mc: bigint | null;
  },
  priceMc: number,
  receiptId: string,
  now: number,
): Promise<ScopeOutcome[]> {
  const common = { keyId: row.key_id, orgId: row.org_id, cause: "charge" as const, tool: row.tool, receiptId, at: now };
  const out: ScopeOutcome[] = [];
  if (row.key_charged_mc !== null) {
    const after = toSafe(row.key_charged_mc);
    out.push({
      ...common,
      scope: "key",
      subjectId: row.key_id,
      period: row.reserved_period,
      budgetMc: toSafe(row.budget_mc),
      thresholds: percentagesOf(row.alert_thresholds),
      chargedBeforeMc: after - priceMc,
      chargedAfterMc: after,
    });
  }
  if (row.org_period !== null && row.org_charged_mc !== null) {
    const [org] = await tx`
      SELECT b.budget_mc, g.alert_thresholds FROM org_budgets b JOIN orgs g ON g.id = b.org_id WHERE b.org_id = ${row.reserved_org_id}`;
    const after = toSafe(row.org_charged_mc);
    out.push({
      ...common,
      scope: "org",
      subjectId: row.reserved_org_id,
      period: row.org_period,
      budgetMc: org.budget_mc === null ? null : toSafe(org.budget_mc),
      thresholds: percentagesOf(org.alert_thresholds),
      chargedBeforeMc: after - priceMc,
      chargedAfterMc: after,
    });
  }
  return out;
}

/** The room a key has left in `period` (a key not used since its reset has all of it), and its org's at `now`. */
export async function remainingOf(sql: SQL, keyId: string, period: string, now: number): Promise<number> {
  const [row] = await sql`SELECT org_id, budget_mc - (CASE WHEN period = ${period} THEN spent_mc ELSE 0 END) AS remaining FROM keys WHERE id = ${keyId}`;
  return row === undefined ? 0 : lesser(toSafe(row.remaining), await orgRoom(sql, row.org_id, now));
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
    // The price goes back to the org's row too: its lock comes first, as in the reservation.
    await lockOrgOfKey(tx, c.keyId);
    const [row] = await tx`
      WITH r AS (
        DELETE FROM reservations WHERE id = ${big(reservationId)}::bigint AND state = 'open' AND approval_stage IS NULL
        RETURNING key_id, org_id, org_period, period, hour, price_mc
      ), k AS (
        UPDATE keys SET
          spent_mc = CASE WHEN keys.period = r.period THEN keys.spent_mc - r.price_mc ELSE keys.spent_mc END,
          fail_count = CASE WHEN keys.fail_hour = r.hour AND keys.fail_count >= ${undo}::integer THEN keys.fail_count - ${undo}::integer ELSE keys.fail_count END
          FROM r WHERE keys.id = r.key_id
        RETURNING keys.budget_mc, keys.spent_mc, keys.period
      ), s AS (
        UPDATE spend SET spent_mc = spend.spent_mc - r.price_mc FROM r WHERE spend.key_id = r.key_id AND spend.period = r.period
      ), ob AS (
        UPDATE org_budgets SET spent_mc = CASE WHEN org_budgets.period = r.org_period THEN org_budgets.spent_mc - r.price_mc ELSE org_budgets.spent_mc END
          FROM r WHERE org_budgets.org_id = r.org_id AND r.org_period IS NOT NULL
      ), os AS (
        UPDATE org_spend SET spent_mc = org_spend.spent_mc - r.price_mc FROM r WHERE org_spend.org_id = r.org_id AND org_spend.period = r.org_period
      )
      SELECT r.org_id, k.budget_mc, k.spent_mc, k.period FROM r, k`;
    if (row === undefined) return null;
    await auditRow(tx, c, row.org_id, outcome, httpStatus);
    return { remainingMc: await roomOf(tx, row as { org_id: string; budget_mc: bigint; spent_mc: bigint; period: string }, c.period, c.now) };
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
