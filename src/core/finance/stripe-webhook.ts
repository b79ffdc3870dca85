// Paid top-ups through Stripe: the `Stripe-Signature` check and a strict reading of the Checkout
// Session events that carry a payment. Pure: bytes, a secret and a clock in, a verdict out. The
// desk answers 400 to every refusal and changes nothing; an ignored event is answered 200 (it is
// genuine, but buys nothing), so Stripe does not retry it for days.
import { createHmac } from "node:crypto";
import { constantTimeEqual } from "../desk/secrets.ts";
import { type TopupRates, toMillicents } from "./topup-rates.ts";

/** Stripe's default, and ours: a signed timestamp more than 5 minutes from now is refused. */
export const STRIPE_TOLERANCE_S = 300;

/** The event types whose Checkout Session may carry a payment that tops up. */
export const STRIPE_TOPUP_EVENTS = ["checkout.session.completed", "checkout.session.async_payment_succeeded"] as const;

export type StripeRefusal =
  | "SIGNATURE_HEADER_MISSING"
  | "SIGNATURE_HEADER_MALFORMED"
  | "SIGNATURE_MISMATCH" // no v1 entry is the HMAC of this body under this secret
  | "TIMESTAMP_STALE" // signed more than the tolerance ago: a replay of an old delivery
  | "TIMESTAMP_FUTURE" // signed more than the tolerance ahead of our clock
  | "EVENT_MALFORMED" // signed, but not an event we can read strictly
  | "CURRENCY_NOT_CONFIGURED" // no --topup-rate for the session's currency
  | "AMOUNT_TOO_LARGE"; // the amount in millicents would pass 2^53 - 1

/** Why a genuine event buys nothing. */
export type StripeIgnored =
  | "EVENT_TYPE" // not one of STRIPE_TOPUP_EVENTS
  | "NO_ORG" // the session has no metadata.org_id: a payment the desk was not asked to credit
  | "NOT_PAID"; // payment_status is not "paid" (unpaid until an async payment succeeds, or no payment required)

export type StripeTopup = {
  kind: "topup";
  /** Stripe's event id (`evt_…`); the desk logs it and may keep it to answer a replay early. */
  eventId: string;
  type: (typeof STRIPE_TOPUP_EVENTS)[number];
  /** The Checkout Session (`cs_…`): one session pays once, whichever events announce it. */
  sessionId: string;
  orgId: string;
  /** `amount_total`, in the currency's minor unit. */
  amountMinor: number;
  /** ISO 4217, upper case. */
  currency: string;
  amountMc: number;
  livemode: boolean;
  /** The top-up's idempotency reference: `stripe:` + the session id. */
  reference: string;
};

export type StripeVerdict =
  | StripeTopup
  | { kind: "ignored"; reason: StripeIgnored; eventId: string; type: string }
  | { kind: "refused"; reason: StripeRefusal; detail: string };

export type StripeWebhookConfig = {
  /** The endpoint's signing secret, `whsec_…`, used as Stripe uses it: its UTF-8 bytes are the HMAC key. */
  secret: string;
  rates: TopupRates;
  /** Seconds either side of now; default 300. */
  toleranceS?: number;
};

/** Null when `text` can be a Stripe endpoint secret, else what is wrong (for the start-up error). */
export function stripeSecretProblem(text: string): string | null {
  if (!text.startsWith("whsec_")) return "a Stripe webhook signing secret starts with whsec_";
  if (!/^whsec_[\x21-\x7e]{16,250}$/.test(text)) return "the secret after whsec_ must be 16-250 printable characters without spaces";
  return null;
}

export type StripeSignatureHeader = { timestamp: number; v1: Uint8Array[] };

const MAX_HEADER = 4096;
const MAX_ENTRIES = 32;
const ENTRY = /^([a-z][a-z0-9]*)=([\x21-\x7e]+)$/;

/**
 * `t=…,v1=…[,v1=…]` read strictly: comma-separated `scheme=value` entries, exactly one `t`
 * (decimal seconds), at least one `v1` (64 lowercase hex), other schemes (`v0`, test schemes)
 * ignored. Anything else (spaces, empty entries, a second `t`) is null: a header we would have
 * to guess at is not verified.
 */
export function parseStripeSignature(header: string): StripeSignatureHeader | null {
  if (header.length === 0 || header.length > MAX_HEADER) return null;
  const entries = header.split(",");
  if (entries.length > MAX_ENTRIES) return null;
  let timestamp: number | null = null;
  const v1: Uint8Array[] = [];
  for (const entry of entries) {
    const m = ENTRY.exec(entry);
    if (!m) return null;
    const [, scheme, value] = m as unknown as [string, string, string];
    if (scheme === "t") {
      if (timestamp !== null || !/^[0-9]{1,12}$/.test(value)) return null;
      timestamp = Number(value);
    } else if (scheme === "v1") {
      if (!/^[0-9a-f]{64}$/.test(value)) return null;
      v1.push(new Uint8Array(Buffer.from(value, "hex")));
    }
  }
  return timestamp === null || v1.length === 0 ? null : { timestamp, v1 };
}

/** HMAC-SHA256 of `{t}.{raw body}` under the secret's UTF-8 bytes, as Stripe signs. */
function expectedSignature(secret: string, timestamp: number, body: Uint8Array): Uint8Array {
  return new Uint8Array(createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest());
}

/** The signature and time checks alone: null when the body is Stripe's, else the refusal. */
export function checkStripeSignature(
  header: string | null,
  body: Uint8Array,
  secret: string,
  nowMs: number,
  toleranceS = STRIPE_TOLERANCE_S,
): { reason: StripeRefusal; detail: string } | null {
  if (header === null || header === "") return { reason: "SIGNATURE_HEADER_MISSING", detail: "no Stripe-Signature header" };
  const parsed = parseStripeSignature(header);
  if (parsed === null) return { reason: "SIGNATURE_HEADER_MALFORMED", detail: "Stripe-Signature is not t=…,v1=… with one t and 64-hex v1 entries" };
  const expected = expectedSignature(secret, parsed.timestamp, body);
  // Every entry is compared in constant time: a near miss tells nothing about the secret.
  let matched = false;
  for (const candidate of parsed.v1) matched = constantTimeEqual(candidate, expected) || matched;
  if (!matched) return { reason: "SIGNATURE_MISMATCH", detail: `no v1 signature matches (${parsed.v1.length} given)` };
  // Only a genuine timestamp is judged, so "stale" is never said of a forgery.
  const age = Math.floor(nowMs / 1000) - parsed.timestamp;
  if (age > toleranceS) return { reason: "TIMESTAMP_STALE", detail: `signed ${age} s ago, more than ${toleranceS} s` };
  if (-age > toleranceS) return { reason: "TIMESTAMP_FUTURE", detail: `signed ${-age} s ahead of this clock, more than ${toleranceS} s` };
  return null;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const EVENT_ID = /^evt_[A-Za-z0-9_]{1,250}$/;
const SESSION_ID = /^cs_[A-Za-z0-9_]{1,250}$/;
const ORG_ID = /^org_[0-9a-hjkmnp-tv-z]{16}$/;
const PAYMENT_STATUSES = new Set(["paid", "unpaid", "no_payment_required"]);
const utf8 = new TextDecoder("utf-8", { fatal: true });

const malformed = (detail: string): StripeVerdict => ({ kind: "refused", reason: "EVENT_MALFORMED", detail });

/**
 * Verifies a webhook delivery and reads it: a top-up, a genuine event that buys nothing, or a
 * refusal. The raw body is what was signed: pass the bytes as received, never re-serialised JSON.
 */
export function readStripeWebhook(header: string | null, body: Uint8Array, config: StripeWebhookConfig, nowMs: number): StripeVerdict {
  const refused = checkStripeSignature(header, body, config.secret, nowMs, config.toleranceS);
  if (refused) return { kind: "refused", ...refused };
  let event: unknown;
  try {
    event = JSON.parse(utf8.decode(body));
  } catch {
    return malformed("the body is not UTF-8 JSON");
  }
  if (!isRecord(event) || event.object !== "event") return malformed('not an event object ("object": "event")');
  if (typeof event.id !== "string" || !EVENT_ID.test(event.id)) return malformed("id is not an evt_ id");
  if (typeof event.type !== "string") return malformed("type is not a string");
  const eventId = event.id;
  const type = event.type;
  if (!(STRIPE_TOPUP_EVENTS as readonly string[]).includes(type)) return { kind: "ignored", reason: "EVENT_TYPE", eventId, type };
  const session = isRecord(event.data) ? event.data.object : undefined;
  if (!isRecord(session) || session.object !== "checkout.session") return malformed("data.object is not a checkout.session");
  if (typeof session.id !== "string" || !SESSION_ID.test(session.id)) return malformed("data.object.id is not a cs_ id");
  if (typeof session.payment_status !== "string" || !PAYMENT_STATUSES.has(session.payment_status))
    return malformed("payment_status is not paid, unpaid or no_payment_required");
  if (typeof session.livemode !== "boolean") return malformed("data.object.livemode is not a boolean");
  const metadata = session.metadata;
  if (metadata !== null && metadata !== undefined && !isRecord(metadata)) return malformed("metadata is not an object");
  const orgId = metadata?.org_id;
  if (orgId === undefined) return { kind: "ignored", reason: "NO_ORG", eventId, type };
  if (typeof orgId !== "string" || !ORG_ID.test(orgId)) return malformed("metadata.org_id is not an org_ id");
  if (session.payment_status !== "paid") return { kind: "ignored", reason: "NOT_PAID", eventId, type };
  const amountMinor = session.amount_total;
  if (!Number.isSafeInteger(amountMinor) || (amountMinor as number) < 1) return malformed("amount_total is not a positive integer");
  if (typeof session.currency !== "string" || !/^[a-z]{3}$/.test(session.currency)) return malformed("currency is not three lowercase letters");
  const currency = session.currency.toUpperCase();
  const converted = toMillicents(config.rates, currency, amountMinor as number);
  if ("problem" in converted) {
    return converted.problem === "NO_RATE"
      ? { kind: "refused", reason: "CURRENCY_NOT_CONFIGURED", detail: `no --topup-rate for ${currency}` }
      : { kind: "refused", reason: "AMOUNT_TOO_LARGE", detail: `${amountMinor} ${currency} is more than 2^53 - 1 mc` };
  }
  return {
    kind: "topup",
    eventId,
    type: type as StripeTopup["type"],
    sessionId: session.id,
    orgId,
    amountMinor: amountMinor as number,
    currency,
    amountMc: converted.mc,
    livemode: session.livemode,
    reference: `stripe:${session.id}`,
  };
}
