// POST /v1/topups/stripe: Stripe's Checkout Session webhook tops an org's budget up. Nothing is
// trusted before the Stripe-Signature check over the raw bytes (core/finance/stripe-webhook.ts);
// anything unverifiable is 400 and changes nothing. The top-up's reference is the session's, so
// a replayed event, or the second event announcing the same payment, counts once.
import type { Desk } from "../../core/desk/desk.ts";
import { errorResponse } from "../../core/errors.ts";
import { readStripeWebhook, type StripeWebhookConfig } from "../../core/finance/stripe-webhook.ts";
import { readAtMost } from "../../core/http/body.ts";
import { printable } from "../../core/receipt/printable.ts";

/** Stripe's events are a few KiB; a body past this is not one. */
const MAX_STRIPE_BODY_BYTES = 256 * 1024;

const SIGNATURE_REFUSALS = new Set(["SIGNATURE_HEADER_MISSING", "SIGNATURE_HEADER_MALFORMED", "SIGNATURE_MISMATCH", "TIMESTAMP_STALE", "TIMESTAMP_FUTURE"]);

export async function stripeTopup(desk: Desk, req: Request, config: StripeWebhookConfig, log: (line: string) => void): Promise<Response> {
  const body = await readAtMost(req.body, MAX_STRIPE_BODY_BYTES);
  if (body === undefined) return errorResponse("BODY_TOO_LARGE");
  const verdict = readStripeWebhook(req.headers.get("stripe-signature"), body, config, desk.now());
  if (verdict.kind === "refused") {
    // The reason goes to the operator's log only: a forger learns nothing from the answer.
    log(`stripe webhook refused: ${verdict.reason}: ${printable(verdict.detail)}`);
    return errorResponse(SIGNATURE_REFUSALS.has(verdict.reason) ? "STRIPE_SIGNATURE_INVALID" : "STRIPE_EVENT_INVALID");
  }
  if (verdict.kind === "ignored") {
    log(`stripe webhook ${verdict.eventId} (${printable(verdict.type)}) ignored: ${verdict.reason}`);
    return Response.json({ ignored: verdict.reason });
  }
  const { added, record } = await desk.topUp(verdict.orgId, verdict.amountMc, verdict.reference);
  log(
    `stripe webhook ${verdict.eventId}: ${verdict.amountMinor} ${verdict.currency} minor units for ${verdict.orgId} ` +
      `(${verdict.reference}) ${added ? `added ${verdict.amountMc} mc` : "already counted"}`,
  );
  return Response.json({ added, record: JSON.parse(record.envelope) });
}
