// Reservations nobody will settle: those of a desk killed mid-call (all open ones at start-up)
// and those older than the upstream timeout plus a margin (a call that hung). Each is refunded
// with a signed `refunded_abandoned` receipt: nobody pays for an answer nobody received.
import type { DeskContext } from "./context.ts";
import { ABANDON_MARGIN_MS } from "./limits.ts";

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

/** The sweep the running desk repeats: reservations older than the timeout plus a margin. */
export function sweepStale(d: DeskContext): Promise<number> {
  return sweepAbandoned(d, d.now() - d.upstreamTimeoutMs - ABANDON_MARGIN_MS);
}
