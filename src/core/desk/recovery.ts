// Reservations nobody will settle: those of a desk killed mid-call (all open ones at start-up)
// and those older than the upstream timeout plus a margin (a call that hung). Each is refunded
// with a signed `refunded_abandoned` receipt: nobody pays for an answer nobody received. A
// reservation awaiting a person's decision is none of these (it outlives a restart): it is
// settled once its ask expired and the approved call could no longer be repeated. Settled
// reservations are pruned once nothing reads them (pruneSettled).
import { readDecision } from "./approval.ts";
import type { DeskContext } from "./context.ts";
import { ABANDON_MARGIN_MS, APPROVAL_USE_MS, HELD_RESULT_MS } from "./limits.ts";
import type { Settlement } from "./ports.ts";

/** Refunds the reservations still open from before `beforeMs`; how many it refunded. */
export async function sweepAbandoned(d: DeskContext, beforeMs: number): Promise<number> {
  const ids = await d.ledger.money.openReservations(beforeMs);
  const settled = await Promise.allSettled(
    ids.map((reservationId) =>
      d.ledger.money.settle({ reservationId, outcome: "refunded_abandoned", resultSha256: null, now: d.now() }, d.signing.receiptMaker().make),
    ),
  );
  let refunded = 0;
  for (const [i, s] of settled.entries()) {
    if (s.status === "fulfilled") {
      if (s.value.kind === "settled") refunded++;
    } else {
      // One reservation that cannot be settled must not keep the others open.
      d.log(`reservation ${ids[i]}: refund failed (${s.reason instanceof Error ? s.reason.name : "error"})`);
    }
  }
  if (refunded > 0) d.log(`refunded ${refunded} abandoned reservation(s)`);
  return refunded;
}

/**
 * The sweep the running desk repeats: reservations older than the timeout plus a margin, and
 * approvals past their use, refunded (how many); then settled reservations pruned.
 */
export async function sweepStale(d: DeskContext): Promise<number> {
  const settled = (await sweepAbandoned(d, d.now() - d.upstreamTimeoutMs - ABANDON_MARGIN_MS)) + (await sweepApprovals(d));
  await pruneSettled(d);
  return settled;
}

/** Settled reservations deleted per transaction: each is a few milliseconds, so no call waits long behind one. */
export const PRUNE_BATCH = 250;

/**
 * Deletes the settled reservations nothing reads any more, a batch per transaction; how many.
 * Two readers come late: a call's own settlement after the sweep refunded it (it answers from
 * the row, "already_settled", also when the desk's clock stepped forward), and the resolution of
 * a settlement cut by an outage (unsettled.ts: a charge that committed holds its result for the
 * agent from the row). Rows are kept as long as a held result is (HELD_RESULT_MS), and at least
 * twice the sweep's age. Reservations an approval names are kept (a repeat of the approved call
 * reads its outcome).
 */
export async function pruneSettled(d: DeskContext): Promise<number> {
  const before = d.now() - Math.max(HELD_RESULT_MS, 2 * (d.upstreamTimeoutMs + ABANDON_MARGIN_MS));
  let pruned = 0;
  for (;;) {
    const n = await d.ledger.money.pruneSettled(before, PRUNE_BATCH);
    pruned += n;
    if (n < PRUNE_BATCH) return pruned;
  }
}

/**
 * Settles each reservation still awaiting a decision APPROVAL_USE_MS after its ask expired, as
 * the person's decision says when the approver gives one the desk can act on: denied →
 * refunded_denied, expired → refunded_expired, approved but never repeated → refunded_abandoned,
 * each binding that decision; without one (the approver unreachable, a decision that fails its
 * checks) → refunded_abandoned alone. Nothing stays held because an approver went away.
 */
export async function sweepApprovals(d: DeskContext): Promise<number> {
  let settled = 0;
  for (const hold of await d.ledger.money.approvalsDue(d.now() - APPROVAL_USE_MS)) {
    try {
      const read = await readDecision(d, hold);
      const base = { reservationId: hold.reservationId, resultSha256: null, now: d.now() };
      const settlement: Settlement =
        read.kind !== "decided"
          ? { ...base, outcome: "refunded_abandoned" }
          : {
              ...base,
              outcome: read.decision === "denied" ? "refunded_denied" : read.decision === "expired" ? "refunded_expired" : "refunded_abandoned",
              approval: read.approval,
            };
      const r = await d.ledger.money.settle(settlement, d.signing.receiptMaker().make);
      if (r.kind === "settled") settled++;
    } catch (err) {
      d.log(`approval ${hold.approvalId}: settling it failed (${err instanceof Error ? err.name : "error"})`);
    }
  }
  if (settled > 0) d.log(`settled ${settled} approval(s) past their use`);
  return settled;
}
