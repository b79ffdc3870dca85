// Standard Webhooks 1.0.0 (standardwebhooks.com), the format of the desk's alert deliveries.
// Three headers: `webhook-id` (the event's id, the same on every retry, so receivers dedupe),
// `webhook-timestamp` (Unix seconds of this attempt) and `webhook-signature`, a space-separated
// list holding two signatures of `{id}.{timestamp}.{body}`:
//   v1,<base64 HMAC-SHA256 under the receiver's whsec_ secret>
//   v1a,<base64 Ed25519 under the desk's receipt-signing key>
// so a receiver checks v1 with the shared secret, or v1a with nothing but the desk's public JWKS.
import { createHmac, randomBytes, verify } from "node:crypto";
import { constantTimeEqual, type RandomSource } from "../desk/secrets.ts";
import type { Jwks, ReceiptSigner } from "../receipt/sign.ts";
import { ReceiptKeys } from "../receipt/verify.ts";

export const WEBHOOK_SECRET_PREFIX = "whsec_";
/** The spec's receiver-side default, and our verifier's. */
export const WEBHOOK_TOLERANCE_S = 300;

export type WebhookHeaders = { "webhook-id": string; "webhook-timestamp": string; "webhook-signature": string };

/** A secret that is not `whsec_` + canonical base64 of 24 to 64 bytes (the spec's bounds). */
export class WebhookSecretError extends Error {
  override name = "WebhookSecretError";
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Standard base64 (with padding) read strictly: one spelling per byte string, else null. */
function decodeBase64(text: string): Buffer | null {
  if (text.length % 4 !== 0 || !BASE64.test(text)) return null;
  const bytes = Buffer.from(text, "base64");
  return bytes.toString("base64") === text ? bytes : null;
}

/** The HMAC key of a `whsec_…` secret; throws WebhookSecretError for anything else. */
export function parseWebhookSecret(text: string): Uint8Array {
  if (!text.startsWith(WEBHOOK_SECRET_PREFIX)) throw new WebhookSecretError("the alert webhook secret must start with whsec_");
  const key = decodeBase64(text.slice(WEBHOOK_SECRET_PREFIX.length));
  if (key === null) throw new WebhookSecretError("the alert webhook secret after whsec_ is not base64");
  if (key.length < 24 || key.length > 64) throw new WebhookSecretError(`the alert webhook secret is ${key.length} bytes; it must be 24 to 64`);
  return new Uint8Array(key);
}

/** A new receiver secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(random: RandomSource = (n) => new Uint8Array(randomBytes(n))): string {
  return WEBHOOK_SECRET_PREFIX + Buffer.from(random(32)).toString("base64");
}

// Ids and timestamps are ours, never the receiver's: no `.` can shift the parts of the signed
// content, and as it starts with an id character it can never be read as a JSON document (a
// receipt, a top-up record or a statement) signed by the same key.
const MESSAGE_ID = /^[A-Za-z0-9_-]{1,256}$/;
const TIMESTAMP = /^[0-9]{1,12}$/;

/** The bytes both signatures cover: `{id}.{timestamp}.{body}`. */
export function signedContent(id: string, timestampS: number | string, body: string | Uint8Array): Uint8Array {
  const head = Buffer.from(`${id}.${timestampS}.`, "utf8");
  const tail = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  const out = new Uint8Array(head.length + tail.length);
  out.set(head, 0);
  out.set(tail, head.length);
  return out;
}

export type WebhookMessage = { id: string; timestampS: number; body: string };

/** The three headers of one attempt, signed v1 (receiver's secret) and v1a (desk's key). */
export function signWebhook(message: WebhookMessage, secret: Uint8Array, signer: Pick<ReceiptSigner, "signBytes">): WebhookHeaders {
  if (!MESSAGE_ID.test(message.id)) throw new RangeError("a webhook id is 1-256 characters of [A-Za-z0-9_-]");
  if (!Number.isSafeInteger(message.timestampS) || message.timestampS < 0) throw new RangeError("a webhook timestamp is whole seconds since the epoch");
  const content = signedContent(message.id, message.timestampS, message.body);
  const v1 = createHmac("sha256", secret).update(content).digest("base64");
  const v1a = Buffer.from(signer.signBytes(content)).toString("base64");
  return {
    "webhook-id": message.id,
    "webhook-timestamp": String(message.timestampS),
    "webhook-signature": `v1,${v1} v1a,${v1a}`,
  };
}

export type WebhookRefusal = "HEADERS_MISSING" | "HEADERS_MALFORMED" | "TIMESTAMP_STALE" | "TIMESTAMP_FUTURE" | "NO_MATCHING_SIGNATURE";
export type WebhookCheck = { ok: true; id: string; timestampS: number } | { ok: false; reason: WebhookRefusal };

type ReceivedHeaders = Headers | Readonly<Record<string, string | undefined>>;

function header(headers: ReceivedHeaders, name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === name) return value;
  return undefined;
}

/** The id, timestamp and the signatures of one scheme, once the timestamp is within the tolerance. */
function received(
  headers: ReceivedHeaders,
  scheme: "v1" | "v1a",
  nowMs: number,
  toleranceS: number,
): { id: string; timestamp: string; signatures: Buffer[] } | { ok: false; reason: WebhookRefusal } {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const list = header(headers, "webhook-signature");
  if (!id || !timestamp || !list) return { ok: false, reason: "HEADERS_MISSING" };
  if (!MESSAGE_ID.test(id) || !TIMESTAMP.test(timestamp) || list.length > 8192) return { ok: false, reason: "HEADERS_MALFORMED" };
  // The attempt's timestamp bounds a replay of a captured delivery.
  const age = Math.floor(nowMs / 1000) - Number(timestamp);
  if (age > toleranceS) return { ok: false, reason: "TIMESTAMP_STALE" };
  if (-age > toleranceS) return { ok: false, reason: "TIMESTAMP_FUTURE" };
  const signatures: Buffer[] = [];
  for (const entry of list.split(" ").slice(0, 16)) {
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== scheme) continue;
    const signature = decodeBase64(entry.slice(comma + 1));
    if (signature !== null) signatures.push(signature);
  }
  return { id, timestamp, signatures };
}

/**
 * The receiver's check of `v1a` with the desk's public JWKS alone: the timestamp within the
 * tolerance of `nowMs`, then any `v1a` entry that is an Ed25519 signature of
 * `{id}.{timestamp}.{body}` under any key of the set (other entries, v1 included, are skipped).
 * `body` must be the raw bytes received. The desk's JWKS lists retired keys after the current
 * one; a receiver that wants only the current key passes `{keys: [jwks.keys[0]]}`.
 */
export function verifyWebhookV1a(
  headers: ReceivedHeaders,
  body: string | Uint8Array,
  keys: ReceiptKeys | Jwks,
  nowMs: number,
  toleranceS = WEBHOOK_TOLERANCE_S,
): (WebhookCheck & { ok: false }) | { ok: true; id: string; timestampS: number; kid: string } {
  const got = received(headers, "v1a", nowMs, toleranceS);
  if ("ok" in got) return got;
  const keySet = keys instanceof ReceiptKeys ? keys : ReceiptKeys.fromJwks(keys);
  const content = signedContent(got.id, got.timestamp, body);
  for (const signature of got.signatures) {
    if (signature.length !== 64) continue;
    for (const kid of keySet.kids) {
      if (verify(null, content, keySet.get(kid)!, signature)) return { ok: true, id: got.id, timestampS: Number(got.timestamp), kid };
    }
  }
  return { ok: false, reason: "NO_MATCHING_SIGNATURE" };
}

/** The `v1` check with the shared secret, compared in constant time (for receivers without a Standard Webhooks library). */
export function verifyWebhookV1(
  headers: ReceivedHeaders,
  body: string | Uint8Array,
  secret: Uint8Array,
  nowMs: number,
  toleranceS = WEBHOOK_TOLERANCE_S,
): WebhookCheck {
  const got = received(headers, "v1", nowMs, toleranceS);
  if ("ok" in got) return got;
  const expected = new Uint8Array(
    createHmac("sha256", secret)
      .update(signedContent(got.id, got.timestamp, body))
      .digest(),
  );
  let matched = false;
  for (const signature of got.signatures) matched = constantTimeEqual(new Uint8Array(signature), expected) || matched;
  return matched ? { ok: true, id: got.id, timestampS: Number(got.timestamp) } : { ok: false, reason: "NO_MATCHING_SIGNATURE" };
}
