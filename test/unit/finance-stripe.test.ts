// The Stripe top-up webhook: every signature here is made by Stripe's own library
// (generateTestHeaderStringAsync), never by our code, and Stripe's own verifier is run beside
// ours on the same deliveries.
import { describe, expect, test } from "bun:test";
import Stripe from "stripe";
import {
  checkStripeSignature,
  parseStripeSignature,
  readStripeWebhook,
  type StripeWebhookConfig,
  stripeSecretProblem,
} from "../../src/core/finance/stripe-webhook.ts";
import { parseTopupRates, TopupRateError, toMillicents } from "../../src/core/finance/topup-rates.ts";

const stripe = new Stripe("sk_test_not_used_for_any_request");
const SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuv";
const OTHER_SECRET = "whsec_test_another_endpoint_secret_zyxwvu";
const NOW_MS = 1_795_000_000_123;
const NOW_S = Math.floor(NOW_MS / 1000);
const ORG = "org_0123456789abcdef";
const config: StripeWebhookConfig = { secret: SECRET, rates: parseTopupRates(["EUR=1000", "JPY=100000"]) };

type SessionPatch = Record<string, unknown>;

function eventJson(session: SessionPatch = {}, event: Record<string, unknown> = {}): string {
  return JSON.stringify({
    id: "evt_1QxYzAbCdEfGhIjK",
    object: "event",
    api_version: "2026-10-29.clover",
    created: NOW_S - 2,
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type: "checkout.session.completed",
    data: {
      object: {
        id: "cs_test_a1B2c3D4e5F6g7H8",
        object: "checkout.session",
        amount_subtotal: 2000,
        amount_total: 2000,
        currency: "eur",
        livemode: false,
        metadata: { org_id: ORG },
        mode: "payment",
        payment_status: "paid",
        status: "complete",
        ...session,
      },
    },
    ...event,
  });
}

const bytes = (text: string) => new TextEncoder().encode(text);

async function signed(payload: string, opts: { secret?: string; timestamp?: number } = {}): Promise<string> {
  return stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: opts.secret ?? SECRET, timestamp: opts.timestamp ?? NOW_S });
}

/** Stripe's own verdict on a delivery at NOW_MS (its tolerance is 300 s by default, past only). */
async function stripeAccepts(payload: string | Uint8Array, header: string, secret = SECRET): Promise<boolean> {
  try {
    await stripe.webhooks.constructEventAsync(payload as string, header, secret, 300, undefined, NOW_MS);
    return true;
  } catch {
    return false;
  }
}

describe("Stripe-Signature, with headers made by Stripe's library", () => {
  test("a good signature tops up: org, amount in minor units and in millicents, reference by session", async () => {
    const body = eventJson();
    const header = await signed(body);
    expect(await stripeAccepts(body, header)).toBe(true);
    expect(readStripeWebhook(header, bytes(body), config, NOW_MS)).toEqual({
      kind: "topup",
      eventId: "evt_1QxYzAbCdEfGhIjK",
      type: "checkout.session.completed",
      sessionId: "cs_test_a1B2c3D4e5F6g7H8",
      orgId: ORG,
      amountMinor: 2000,
      currency: "EUR",
      amountMc: 2_000_000,
      livemode: false,
      reference: "stripe:cs_test_a1B2c3D4e5F6g7H8",
    });
  });

  test("a bad signature, and the signature of another endpoint's secret, are refused", async () => {
    const body = eventJson();
    const forged = `t=${NOW_S},v1=${"ab".repeat(32)}`;
    const other = await signed(body, { secret: OTHER_SECRET });
    for (const header of [forged, other]) {
      expect(await stripeAccepts(body, header)).toBe(false);
      expect(readStripeWebhook(header, bytes(body), config, NOW_MS)).toMatchObject({ kind: "refused", reason: "SIGNATURE_MISMATCH" });
    }
  });

  test("the tolerance window: 300 s either side passes, 301 s is stale or future", async () => {
    const body = eventJson();
    const at = async (offset: number) => readStripeWebhook(await signed(body, { timestamp: NOW_S + offset }), bytes(body), config, NOW_MS);
    expect((await at(-300)).kind).toBe("topup");
    expect((await at(300)).kind).toBe("topup");
    expect(await at(-301)).toMatchObject({ kind: "refused", reason: "TIMESTAMP_STALE" });
    expect(await at(301)).toMatchObject({ kind: "refused", reason: "TIMESTAMP_FUTURE" });
    expect(await at(-86_400)).toMatchObject({ kind: "refused", reason: "TIMESTAMP_STALE" });
    // The window is configurable; a shorter one refuses sooner.
    const header = await signed(body, { timestamp: NOW_S - 61 });
    expect(readStripeWebhook(header, bytes(body), { ...config, toleranceS: 60 }, NOW_MS)).toMatchObject({ reason: "TIMESTAMP_STALE" });
  });

  test("Stripe's own verifier agrees on every past-or-present case; only we refuse a future timestamp", async () => {
    const body = eventJson();
    for (const offset of [-301, -300, -10, 0, 10, 300, 301, 3600]) {
      const header = await signed(body, { timestamp: NOW_S + offset });
      const ours = checkStripeSignature(header, bytes(body), SECRET, NOW_MS) === null;
      const theirs = await stripeAccepts(body, header);
      // Stripe's library bounds only the age; a timestamp ahead of the clock passes it.
      expect({ offset, ours }).toEqual({ offset, ours: offset > 300 ? false : theirs });
      if (offset > 300) expect(theirs).toBe(true);
    }
  });

  test("a replayed delivery inside the window reads the same event id and reference (the desk credits it once); outside it is stale", async () => {
    const body = eventJson();
    const header = await signed(body);
    const first = readStripeWebhook(header, bytes(body), config, NOW_MS);
    const again = readStripeWebhook(header, bytes(body), config, NOW_MS + 120_000);
    expect(first.kind).toBe("topup");
    expect(again).toEqual(first);
    // Another event announcing the same session (async payment) carries the same reference.
    const async = eventJson({}, { id: "evt_1QxYzAsyncPaid", type: "checkout.session.async_payment_succeeded" });
    const later = readStripeWebhook(await signed(async), bytes(async), config, NOW_MS);
    expect(later).toMatchObject({ kind: "topup", eventId: "evt_1QxYzAsyncPaid", reference: (first as { reference: string }).reference });
    expect(readStripeWebhook(header, bytes(body), config, NOW_MS + 301_000)).toMatchObject({ kind: "refused", reason: "TIMESTAMP_STALE" });
  });

  test("a body changed by one byte, at every position, is refused", async () => {
    const body = eventJson();
    const header = await signed(body);
    const original = bytes(body);
    let refused = 0;
    for (let i = 0; i < original.length; i++) {
      const changed = original.slice();
      changed[i] = changed[i]! ^ 0x01;
      const verdict = readStripeWebhook(header, changed, config, NOW_MS);
      if (verdict.kind === "refused" && verdict.reason === "SIGNATURE_MISMATCH") refused++;
    }
    expect(refused).toBe(original.length);
    // One byte added or taken away at the end, too.
    expect(readStripeWebhook(header, bytes(`${body} `), config, NOW_MS)).toMatchObject({ reason: "SIGNATURE_MISMATCH" });
    expect(readStripeWebhook(header, original.slice(0, -1), config, NOW_MS)).toMatchObject({ reason: "SIGNATURE_MISMATCH" });
  });

  test("several v1 entries (a secret being rolled) pass when one is valid, in any order; v0 and unknown schemes are ignored", async () => {
    const body = eventJson();
    const good = (await signed(body)).split(",")[1]!;
    const stale = (await signed(body, { secret: OTHER_SECRET })).split(",")[1]!;
    const v0 = `v0=${"cd".repeat(32)}`;
    for (const header of [
      `t=${NOW_S},${stale},${good}`,
      `t=${NOW_S},${good},${stale}`,
      `t=${NOW_S},${v0},${stale},${good}`,
      `${good},t=${NOW_S},x9=anything`,
    ]) {
      expect(await stripeAccepts(body, header)).toBe(true);
      expect(readStripeWebhook(header, bytes(body), config, NOW_MS).kind).toBe("topup");
    }
    // Only v0 and a wrong v1: refused (v0 is never checked).
    expect(readStripeWebhook(`t=${NOW_S},${v0},${stale}`, bytes(body), config, NOW_MS)).toMatchObject({ reason: "SIGNATURE_MISMATCH" });
  });

  test("a header we would have to guess at is refused as malformed", async () => {
    const body = eventJson();
    const good = (await signed(body)).split(",")[1]!;
    const cases = [
      `t=${NOW_S}`, // no v1
      `${good}`, // no t
      `t=${NOW_S},t=${NOW_S},${good}`, // two t
      `t=${NOW_S}.5,${good}`,
      `t=-${NOW_S},${good}`,
      `t=${NOW_S}, ${good}`, // a space
      `t=${NOW_S},,${good}`, // an empty entry
      `t=${NOW_S},${good.toUpperCase().replace("V1", "v1")}`, // upper-case hex
      `t=${NOW_S},v1=${"ab".repeat(31)}`, // 62 hex
      `t=${NOW_S},v1`,
      `T=${NOW_S},${good}`,
      `t=${NOW_S},${good},${"v0=x,".repeat(40)}v0=x`, // too many entries
    ];
    for (const header of cases) {
      expect({ header, verdict: readStripeWebhook(header, bytes(body), config, NOW_MS) }).toMatchObject({
        header,
        verdict: { kind: "refused", reason: "SIGNATURE_HEADER_MALFORMED" },
      });
    }
    expect(readStripeWebhook(null, bytes(body), config, NOW_MS)).toMatchObject({ reason: "SIGNATURE_HEADER_MISSING" });
    expect(readStripeWebhook("", bytes(body), config, NOW_MS)).toMatchObject({ reason: "SIGNATURE_HEADER_MISSING" });
    expect(parseStripeSignature(`t=${NOW_S},${good},v1=${"0".repeat(64)}`)?.v1).toHaveLength(2);
  });
});

describe("the event, read strictly once its signature holds", () => {
  async function verdictOf(session: SessionPatch, event: Record<string, unknown> = {}) {
    const body = eventJson(session, event);
    return readStripeWebhook(await signed(body), bytes(body), config, NOW_MS);
  }

  test("only payment_status paid tops up; unpaid and no_payment_required are genuine but buy nothing", async () => {
    expect(await verdictOf({ payment_status: "unpaid" })).toMatchObject({ kind: "ignored", reason: "NOT_PAID" });
    expect(await verdictOf({ payment_status: "no_payment_required", amount_total: 0 })).toMatchObject({ kind: "ignored", reason: "NOT_PAID" });
    expect(await verdictOf({ payment_status: "refunded" })).toMatchObject({ kind: "refused", reason: "EVENT_MALFORMED" });
  });

  test("other event types and sessions without metadata.org_id are ignored, not refused", async () => {
    expect(await verdictOf({}, { type: "checkout.session.expired" })).toMatchObject({
      kind: "ignored",
      reason: "EVENT_TYPE",
      type: "checkout.session.expired",
    });
    expect(await verdictOf({}, { type: "invoice.paid", data: { object: { id: "in_1", object: "invoice" } } })).toMatchObject({
      kind: "ignored",
      reason: "EVENT_TYPE",
    });
    expect(await verdictOf({ metadata: {} })).toMatchObject({ kind: "ignored", reason: "NO_ORG" });
    expect(await verdictOf({ metadata: null })).toMatchObject({ kind: "ignored", reason: "NO_ORG" });
  });

  test("amounts and currencies: integers only, a configured rate, a zero-decimal currency", async () => {
    expect(await verdictOf({ amount_total: 1500, currency: "jpy" })).toMatchObject({
      kind: "topup",
      currency: "JPY",
      amountMinor: 1500,
      amountMc: 150_000_000,
    });
    expect(await verdictOf({ currency: "usd" })).toMatchObject({ kind: "refused", reason: "CURRENCY_NOT_CONFIGURED", detail: "no --topup-rate for USD" });
    expect(await verdictOf({ amount_total: 2 ** 53 - 1 })).toMatchObject({ kind: "refused", reason: "AMOUNT_TOO_LARGE" });
    for (const amount_total of [20.5, -1, 0, null, "2000", 2 ** 53]) {
      expect({ amount_total, v: await verdictOf({ amount_total }) }).toMatchObject({ amount_total, v: { kind: "refused", reason: "EVENT_MALFORMED" } });
    }
    for (const currency of ["EUR", "eu", "euro", null]) {
      expect({ currency, v: await verdictOf({ currency }) }).toMatchObject({ currency, v: { kind: "refused", reason: "EVENT_MALFORMED" } });
    }
  });

  test("ids and shapes that are not Stripe's are refused", async () => {
    const cases: [SessionPatch, Record<string, unknown>][] = [
      [{ metadata: { org_id: "org_short" } }, {}],
      [{ metadata: { org_id: 42 } }, {}],
      [{ metadata: "org_0123456789abcdef" }, {}],
      [{ id: "pi_123" }, {}],
      [{ object: "payment_intent" }, {}],
      [{ livemode: "false" }, {}],
      [{}, { id: "not-an-event" }],
      [{}, { object: "list" }],
      [{}, { data: [] }],
    ];
    for (const [session, event] of cases) expect(await verdictOf(session, event)).toMatchObject({ kind: "refused", reason: "EVENT_MALFORMED" });
    const notJson = "not json at all";
    expect(readStripeWebhook(await signed(notJson), bytes(notJson), config, NOW_MS)).toMatchObject({ reason: "EVENT_MALFORMED" });
    const notUtf8 = new Uint8Array([0x7b, 0xff, 0x7d]);
    const header = await stripe.webhooks.generateTestHeaderStringAsync({ payload: "{\uFFFD}", secret: SECRET, timestamp: NOW_S });
    // Signed over other bytes than sent, so refused before it is read.
    expect(readStripeWebhook(header, notUtf8, config, NOW_MS)).toMatchObject({ reason: "SIGNATURE_MISMATCH" });
  });
});

describe("top-up rates and the endpoint secret", () => {
  test("CUR=N with a current ISO 4217 code and a positive safe integer, each currency once", () => {
    const rates = parseTopupRates(["EUR=1000", "USD=930", "JPY=65000"]);
    expect([...rates]).toEqual([
      ["EUR", 1000],
      ["USD", 930],
      ["JPY", 65000],
    ]);
    for (const bad of [
      "EUR",
      "EUR=",
      "eur=1000",
      "EUR=0",
      "EUR=01",
      "EUR=1.5",
      "EUR=-1",
      "EUR=1e3",
      "XXX=1",
      "HRK=1000",
      " EUR=1000",
      "EUR=9007199254740992",
    ]) {
      expect(() => parseTopupRates([bad])).toThrow(TopupRateError);
    }
    expect(() => parseTopupRates(["EUR=1000", "EUR=2000"])).toThrow("given twice");
  });

  test("conversion is exact in bigint and refuses what passes 2^53 - 1", () => {
    const rates = parseTopupRates(["EUR=1000", "BHD=9007199254740991"]);
    expect(toMillicents(rates, "EUR", 9_007_199_254_740)).toEqual({ mc: 9_007_199_254_740_000 });
    expect(toMillicents(rates, "EUR", 9_007_199_254_741)).toEqual({ problem: "TOO_LARGE" });
    expect(toMillicents(rates, "BHD", 1)).toEqual({ mc: Number.MAX_SAFE_INTEGER });
    expect(toMillicents(rates, "BHD", 2)).toEqual({ problem: "TOO_LARGE" });
    expect(toMillicents(rates, "GBP", 1)).toEqual({ problem: "NO_RATE" });
  });

  test("a Stripe endpoint secret starts with whsec_", () => {
    expect(stripeSecretProblem(SECRET)).toBeNull();
    expect(stripeSecretProblem("sk_live_123")).toContain("whsec_");
    expect(stripeSecretProblem("whsec_short")).not.toBeNull();
    expect(stripeSecretProblem("whsec_has a space in the middle")).not.toBeNull();
  });
});
