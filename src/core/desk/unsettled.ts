// Calls whose settlement failed with the ledger unavailable: the COMMIT may have happened or not,
// so the agent was answered 503 LEDGER_UNAVAILABLE without its result (a paid result is never
// handed over unless its charge is proven). Once the ledger answers again, each is settled once
// more as refunded_abandoned: a reservation settles only once, so when the first settlement had
// committed as a charge that charge stands and the result is held for the agent to fetch (it
// paid for it); otherwise the call is refunded.
import type { DeskContext } from "./context.ts";
import { HELD_RESULT_MS, HELD_RESULTS_PER_KEY } from "./limits.ts";
import { LedgerUnavailable } from "./ports.ts";

/** Calls kept for resolution at most; past it the oldest is left to the abandoned sweep (its result lost). */
const MAX_UNSETTLED = 1_000;

type Unsettled = { reservationId: number; keyId: string; result: Record<string, unknown> | null };

export class UnsettledCalls {
  private readonly calls = new Map<number, Unsettled>();

  add(call: Unsettled): void {
    if (this.calls.size >= MAX_UNSETTLED) this.calls.delete(this.calls.keys().next().value!);
    this.calls.set(call.reservationId, call);
  }

  get size(): number {
    return this.calls.size;
  }

  /** Settles each call once more; those the ledger still cannot take wait for the next round. How many were resolved. */
  async resolve(d: DeskContext): Promise<number> {
    let resolved = 0;
    for (const call of [...this.calls.values()]) {
      try {
        const now = d.now();
        const s = await d.ledger.money.settle(
          { reservationId: call.reservationId, outcome: "refunded_abandoned", resultSha256: null, now },
          d.signing.receiptMaker().make,
        );
        if (s.kind === "already_settled" && s.outcome === "charged" && s.receipt !== null && call.result !== null) {
          await d.ledger.money.holdResult({
            receiptId: s.receipt.id,
            keyId: call.keyId,
            result: call.result,
            heldUntil: now + HELD_RESULT_MS,
            now,
            perKey: HELD_RESULTS_PER_KEY,
          });
          d.log(`receipt ${s.receipt.id}: charged, but its answer was lost with the ledger; the result is held for ${HELD_RESULT_MS / 60_000} min`);
        } else if (s.kind === "settled") {
          d.log(`reservation ${call.reservationId}: refunded (its settlement was lost with the ledger)`);
        }
        this.calls.delete(call.reservationId);
        resolved++;
      } catch (err) {
        if (err instanceof LedgerUnavailable) return resolved;
        // Anything else will not go better next time: the abandoned sweep has the reservation.
        this.calls.delete(call.reservationId);
        d.log(`reservation ${call.reservationId}: resolution failed (${err instanceof Error ? err.name : "error"})`);
      }
    }
    return resolved;
  }
}
