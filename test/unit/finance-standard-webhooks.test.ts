// Alert deliveries in the Standard Webhooks format: v1 checked by the reference library
// (`standardwebhooks`, which knows only v1 and must skip the v1a entry beside it), v1a checked
// with bare node:crypto from the public JWK, and our receiver-side helpers held to both.
import { describe, expect, test } from "bun:test";
import { createPublicKey, verify } from "node:crypto";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import {
  newWebhookSecret,
  parseWebhookSecret,
  signWebhook,
  verifyWebhookV1,
  verifyWebhookV1a,
  WebhookSecretError,
} from "../../src/core/finance/standard-webhooks.ts";
import { generateSigningKey, jwksOf, loadSigner } from "../../src/core/receipt/index.ts";

const desk = generateSigningKey();
const signer = loadSigner(desk.privatePem);
const retired = generateSigningKey();
const retiredSigner = loadSigner(retired.privatePem);
const jwks = jwksOf(desk.publicJwk, [retired.publicJwk]);
const SECRET_TEXT = newWebhookSecret();
const secret = parseWebhookSecret(SECRET_TEXT);
const BODY = JSON.stringify({ type: "budget.threshold_crossed", timestamp: "2026-11-30T09:15:02.417Z", data: { v: 1, threshold_pct: 80 } });
const ID = "alrt_0123456789abcdef";

const nowS = () => Math.floor(Date.now() / 1000);

describe("the sender's headers", () => {
  test("one header holds v1 (HMAC, 32 bytes) and v1a (Ed25519, 64 bytes), space-separated, standard base64", () => {
    const headers = signWebhook({ id: ID, timestampS: 1_795_000_000, body: BODY }, secret, signer);
    expect(headers["webhook-id"]).toBe(ID);
    expect(headers["webhook-timestamp"]).toBe("1795000000");
    expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1a,[A-Za-z0-9+/]{86}==$/);
  });

  test("the standardwebhooks library accepts the header with the v1a entry beside v1", () => {
    const headers = signWebhook({ id: ID, timestampS: nowS(), body: BODY }, secret, signer);
    expect(new Webhook(SECRET_TEXT).verify(BODY, headers)).toEqual(JSON.parse(BODY));
    // v1a alone is not something it can check: it finds no v1.
    const v1aOnly = { ...headers, "webhook-signature": headers["webhook-signature"].split(" ")[1]! };
    expect(() => new Webhook(SECRET_TEXT).verify(BODY, v1aOnly)).toThrow(WebhookVerificationError);
  });

  test("the library refuses a changed body, another secret, and a changed id or timestamp", () => {
    const ts = nowS();
    const headers = signWebhook({ id: ID, timestampS: ts, body: BODY }, secret, signer);
    const wh = new Webhook(SECRET_TEXT);
    expect(() => wh.verify(BODY.replace("80", "81"), headers)).toThrow(WebhookVerificationError);
    expect(() => new Webhook(newWebhookSecret()).verify(BODY, headers)).toThrow(WebhookVerificationError);
    expect(() => wh.verify(BODY, { ...headers, "webhook-id": "alrt_other" })).toThrow(WebhookVerificationError);
    expect(() => wh.verify(BODY, { ...headers, "webhook-timestamp": String(ts - 1) })).toThrow(WebhookVerificationError);
  });

  test("v1a is Ed25519 over {id}.{timestamp}.{body}, checked with node:crypto from the public JWK alone", () => {
    const ts = nowS();
    const headers = signWebhook({ id: ID, timestampS: ts, body: BODY }, secret, signer);
    const v1a = headers["webhook-signature"]
      .split(" ")
      .find((e) => e.startsWith("v1a,"))!
      .slice(4);
    const { kty, crv, x } = jwks.keys[0]!;
    const key = createPublicKey({ key: { kty, crv, x }, format: "jwk" });
    const signature = Buffer.from(v1a, "base64");
    expect(verify(null, Buffer.from(`${ID}.${ts}.${BODY}`), key, signature)).toBe(true);
    expect(verify(null, Buffer.from(`${ID}.${ts}.${BODY} `), key, signature)).toBe(false);
  });

  test("ids with a dot (which could shift the signed parts) or outside [A-Za-z0-9_-] are refused", () => {
    for (const id of ["alrt.1", "", '{"v":1}', "a b", "x".repeat(257)]) {
      expect(() => signWebhook({ id, timestampS: 1, body: BODY }, secret, signer)).toThrow(RangeError);
    }
    expect(() => signWebhook({ id: ID, timestampS: 1.5, body: BODY }, secret, signer)).toThrow(RangeError);
  });
});

describe("the receiver's v1a helper (public JWKS only) and v1 helper", () => {
  const ts = 1_795_000_000;
  const nowMs = ts * 1000 + 400;
  const headers = signWebhook({ id: ID, timestampS: ts, body: BODY }, secret, signer);

  test("a genuine delivery passes both, v1a naming the key that signed it", () => {
    expect(verifyWebhookV1a(headers, BODY, jwks, nowMs)).toEqual({ ok: true, id: ID, timestampS: ts, kid: desk.kid });
    expect(verifyWebhookV1a(headers, new TextEncoder().encode(BODY), jwks, nowMs).ok).toBe(true);
    expect(verifyWebhookV1(headers, BODY, secret, nowMs)).toEqual({ ok: true, id: ID, timestampS: ts });
    expect(verifyWebhookV1(new Headers(headers), BODY, secret, nowMs).ok).toBe(true);
  });

  test("a changed body, id or timestamp, or another desk's keys: no matching signature", () => {
    const other = jwksOf(generateSigningKey().publicJwk);
    expect(verifyWebhookV1a(headers, `${BODY} `, jwks, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
    expect(verifyWebhookV1a({ ...headers, "webhook-id": "alrt_other" }, BODY, jwks, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
    expect(verifyWebhookV1a({ ...headers, "webhook-timestamp": String(ts + 1) }, BODY, jwks, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
    expect(verifyWebhookV1a(headers, BODY, other, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
    expect(verifyWebhookV1(headers, `${BODY} `, secret, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
    expect(verifyWebhookV1(headers, BODY, parseWebhookSecret(newWebhookSecret()), nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
  });

  test("each helper reads only its own scheme: v1 cannot pass as v1a nor the reverse", () => {
    const [v1, v1a] = headers["webhook-signature"].split(" ") as [string, string];
    expect(verifyWebhookV1a({ ...headers, "webhook-signature": v1 }, BODY, jwks, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
    expect(verifyWebhookV1({ ...headers, "webhook-signature": v1a }, BODY, secret, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
    expect(verifyWebhookV1a({ ...headers, "webhook-signature": `v2,abc ${v1a}` }, BODY, jwks, nowMs).ok).toBe(true);
    // A v1a entry whose base64 is re-spelled (no padding) is not read.
    expect(verifyWebhookV1a({ ...headers, "webhook-signature": v1a.replace(/=+$/, "") }, BODY, jwks, nowMs)).toEqual({
      ok: false,
      reason: "NO_MATCHING_SIGNATURE",
    });
  });

  test("the tolerance: 300 s either side, then stale or future; missing or malformed headers", () => {
    expect(verifyWebhookV1a(headers, BODY, jwks, (ts + 300) * 1000).ok).toBe(true);
    expect(verifyWebhookV1a(headers, BODY, jwks, (ts + 301) * 1000)).toEqual({ ok: false, reason: "TIMESTAMP_STALE" });
    expect(verifyWebhookV1a(headers, BODY, jwks, (ts - 301) * 1000)).toEqual({ ok: false, reason: "TIMESTAMP_FUTURE" });
    expect(verifyWebhookV1(headers, BODY, secret, (ts + 301) * 1000)).toEqual({ ok: false, reason: "TIMESTAMP_STALE" });
    const { "webhook-id": _, ...noId } = headers;
    expect(verifyWebhookV1a(noId, BODY, jwks, nowMs)).toEqual({ ok: false, reason: "HEADERS_MISSING" });
    expect(verifyWebhookV1a({ ...headers, "webhook-timestamp": "1795000000.0" }, BODY, jwks, nowMs)).toEqual({ ok: false, reason: "HEADERS_MALFORMED" });
    expect(verifyWebhookV1a({ ...headers, "webhook-id": "a.b" }, BODY, jwks, nowMs)).toEqual({ ok: false, reason: "HEADERS_MALFORMED" });
  });

  test("retired keys in the JWKS verify; a receiver pinning the current key refuses them", () => {
    const old = signWebhook({ id: ID, timestampS: ts, body: BODY }, secret, retiredSigner);
    expect(verifyWebhookV1a(old, BODY, jwks, nowMs)).toEqual({ ok: true, id: ID, timestampS: ts, kid: retired.kid });
    expect(verifyWebhookV1a(old, BODY, { keys: [jwks.keys[0]!] }, nowMs)).toEqual({ ok: false, reason: "NO_MATCHING_SIGNATURE" });
  });
});

describe("the receiver's secret", () => {
  test("whsec_ + canonical base64 of 24 to 64 bytes; the library reads the same key", () => {
    const text = newWebhookSecret();
    expect(text).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(parseWebhookSecret(text)).toHaveLength(32);
    expect(parseWebhookSecret(`whsec_${Buffer.alloc(24, 7).toString("base64")}`)).toHaveLength(24);
    expect(parseWebhookSecret(`whsec_${Buffer.alloc(64, 7).toString("base64")}`)).toHaveLength(64);
    for (const bad of [
      Buffer.alloc(32).toString("base64"), // no prefix
      `whsec_${Buffer.alloc(23, 1).toString("base64")}`,
      `whsec_${Buffer.alloc(65, 1).toString("base64")}`,
      `whsec_${Buffer.alloc(32, 1).toString("base64url")}`,
      `whsec_${Buffer.alloc(32, 1).toString("base64").replace(/=$/, "")}`,
      "whsec_not base64 at all!",
    ]) {
      expect(() => parseWebhookSecret(bad)).toThrow(WebhookSecretError);
    }
  });
});
