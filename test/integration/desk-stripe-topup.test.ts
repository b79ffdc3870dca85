// POST /v1/topups/stripe through the desk's fetch handler: every signature is made by Stripe's
// own library (generateTestHeaderStringAsync; the sync one throws under Bun), never by our code.
// A genuine paid Checkout Session tops the org up once per session, however often Stripe
// delivers it; anything unverifiable is 400 and changes nothing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Stripe from "stripe";
import { createHandler, type Handler } from "../../src/commands/desk/http.ts";
import { sha256 } from "../../src/core/desk/secrets.ts";
import { parseTopupRates } from "../../src/core/finance/topup-rates.ts";
import { ADMIN_TOKEN, makeDesk, manualClock, type TestDesk } from "./desk-harness.ts";

const stripe = new Stripe("sk_test_not_used_for_any_request");
const SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuv";
const clock = manualClock("2026-11-30T12:00:00.000Z");
const nowS = () => Math.floor(clock.now() / 1000);
let t: TestDesk;
let webhook: Handler;
const logs: string[] = [];
let orgId: string;

beforeAll(async () => {
  t = await makeDesk({ now: clock.now });
  webhook = createHandler(t.desk, {
    adminTokenSha256: sha256(ADMIN_TOKEN),
    stripe: { secret: SECRET, rates: parseTopupRates(["EUR=1000"]) },
    log: (line) => logs.push(line),
  });
  orgId = ((await (await t.admin("POST", "/admin/orgs", { name: "paying" })).json()) as { org_id: string }).org_id;
  expect((await t.admin("PATCH", `/admin/orgs/${orgId}`, { budget_mc: 0, reset: "none" })).status).toBe(200);
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
});

function event(opts: { id?: string; type?: string; session?: string; org?: unknown; amount?: number; currency?: string; status?: string } = {}): string {
  return JSON.stringify({
    id: opts.id ?? "evt_1QxYzAbCdEfGhIjK",
    object: "event",
    api_version: "2026-10-29.clover",
    created: nowS() - 2,
    livemode: false,
    type: opts.type ?? "checkout.session.completed",
    data: {
      object: {
        id: opts.session ?? "cs_test_a1B2c3D4e5F6g7H8",
        object: "checkout.session",
        amount_total: opts.amount ?? 2000,
        currency: opts.currency ?? "eur",
        livemode: false,
        metadata: opts.org === undefined ? { org_id: orgId } : opts.org === null ? {} : { org_id: opts.org },
        mode: "payment",
        payment_status: opts.status ?? "paid",
      },
    },
  });
}

async function deliver(payload: string, sign: { secret?: string; timestamp?: number; header?: string | null } = {}) {
  const header =
    sign.header !== undefined
      ? sign.header
      : await stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: sign.secret ?? SECRET, timestamp: sign.timestamp ?? nowS() });
  const r = await webhook(
    new Request("http://desk.test/v1/topups/stripe", {
      method: "POST",
      headers: { "content-type": "application/json", ...(header === null ? {} : { "stripe-signature": header }) },
      body: payload,
    }),
  );
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const budgetMc = async () => ((await (await t.admin("GET", `/admin/orgs/${orgId}`)).json()) as { budget: { budget_mc: number } }).budget.budget_mc;
const recordCount = () => (t.ledger.testOnlyDatabase().query("SELECT count(*) AS n FROM org_records WHERE org_id = ?").get(orgId) as { n: number }).n;

describe("POST /v1/topups/stripe", () => {
  test("a paid session tops up at the configured rate, once: a replay, and the session's second event, count once", async () => {
    const first = await deliver(event());
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      added: true,
      record: { record: { type: "topup", amount_mc: 2_000_000, reference: "stripe:cs_test_a1B2c3D4e5F6g7H8" } },
    });
    expect(await budgetMc()).toBe(2_000_000);
    const replay = await deliver(event());
    expect(replay).toMatchObject({ status: 200, body: { added: false } });
    const async = await deliver(event({ id: "evt_async_second", type: "checkout.session.async_payment_succeeded" }));
    expect(async).toMatchObject({ status: 200, body: { added: false } });
    expect(await budgetMc()).toBe(2_000_000);
    // Ten retries at once still count once.
    const burst = await Promise.all(Array.from({ length: 10 }, () => deliver(event({ id: "evt_burst", session: "cs_test_burst" }))));
    expect(burst.filter((b) => b.body.added === true).length).toBe(1);
    expect(await budgetMc()).toBe(4_000_000);
  });

  test("anything unverifiable is 400 and changes nothing", async () => {
    const before = [await budgetMc(), recordCount()];
    const payload = event({ id: "evt_forged", session: "cs_test_forged" });
    const cases: [string, Awaited<ReturnType<typeof deliver>>][] = [
      ["another secret", await deliver(payload, { secret: "whsec_test_another_endpoint_secret_zyxwvu" })],
      ["no header", await deliver(payload, { header: null })],
      ["a malformed header", await deliver(payload, { header: "t=1,v1=zz" })],
      ["stale", await deliver(payload, { timestamp: nowS() - 301 })],
      ["ahead", await deliver(payload, { timestamp: nowS() + 301 })],
    ];
    for (const [, answer] of cases) expect(answer).toEqual({ status: 400, body: { error: "STRIPE_SIGNATURE_INVALID" } });
    // A body changed after signing: the signature was made over other bytes.
    const header = await stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: SECRET, timestamp: nowS() });
    expect(await deliver(payload.replace("2000", "9000"), { header })).toEqual({ status: 400, body: { error: "STRIPE_SIGNATURE_INVALID" } });
    // Signed, but not something the desk can credit.
    expect(await deliver(event({ id: "evt_usd", session: "cs_test_usd", currency: "usd" }))).toEqual({ status: 400, body: { error: "STRIPE_EVENT_INVALID" } });
    expect(await deliver(event({ id: "evt_bad_org", session: "cs_test_bad_org", org: "not an org" }))).toEqual({
      status: 400,
      body: { error: "STRIPE_EVENT_INVALID" },
    });
    expect(await deliver('{"object":"event"}')).toEqual({ status: 400, body: { error: "STRIPE_EVENT_INVALID" } });
    expect([await budgetMc(), recordCount()]).toEqual(before);
    expect(logs.some((l) => l.includes("TIMESTAMP_STALE"))).toBe(true);
  });

  test("genuine events that buy nothing are 200 and ignored; an unknown org is 404", async () => {
    const before = [await budgetMc(), recordCount()];
    expect(await deliver(event({ id: "evt_other", type: "invoice.paid" }))).toEqual({ status: 200, body: { ignored: "EVENT_TYPE" } });
    expect(await deliver(event({ id: "evt_no_org", session: "cs_test_no_org", org: null }))).toEqual({ status: 200, body: { ignored: "NO_ORG" } });
    expect(await deliver(event({ id: "evt_unpaid", session: "cs_test_unpaid", status: "unpaid" }))).toEqual({ status: 200, body: { ignored: "NOT_PAID" } });
    expect(await deliver(event({ id: "evt_unknown", session: "cs_test_unknown", org: "org_0123456789abcdef" }))).toEqual({
      status: 404,
      body: { error: "ORG_UNKNOWN" },
    });
    expect([await budgetMc(), recordCount()]).toEqual(before);
  });

  test("without --stripe-webhook-secret-file the path does not exist", async () => {
    const r = await t.handler(new Request("http://desk.test/v1/topups/stripe", { method: "POST", body: event() }));
    expect(r.status).toBe(404);
  });
});
