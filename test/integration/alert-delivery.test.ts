// The alert delivery loop against real receivers (Bun.serve on 127.0.0.1:0): retries with
// back-off under one id, a receiver that hangs, one that redirects, a restart, one delivery of
// an alert at a time, and the give-up point. The schedule runs on an injected clock, so no test
// waits for a back-off; every v1 signature is checked by the `standardwebhooks` library.
import { afterEach, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { type AttemptReport, AlertDelivery, type AlertDeliveryOptions } from "../../src/adapters/webhooks/alert-delivery.ts";
import { RETRY_DELAYS_MS } from "../../src/core/finance/alert-outbox.ts";
import { newWebhookSecret, parseWebhookSecret, verifyWebhookV1a } from "../../src/core/finance/standard-webhooks.ts";
import { generateSigningKey, jwksOf, loadSigner } from "../../src/core/receipt/index.ts";
import { describeAlertOutboxContract } from "../helpers/alert-outbox-contract.ts";
import { MemoryAlertOutbox } from "../helpers/alert-outbox-memory.ts";

const key = generateSigningKey();
const signer = loadSigner(key.privatePem);
const jwks = jwksOf(key.publicJwk);
const SECRET_TEXT = newWebhookSecret();
const secret = parseWebhookSecret(SECRET_TEXT);
const BODY = '{"data":{"alert_id":"alrt_0123456789abcdef","v":1},"timestamp":"2026-11-30T09:15:02.417Z","type":"budget.threshold_crossed"}';

type Seen = { id: string; timestamp: string; signature: string; body: string; contentType: string | null };

const servers: { stop(force?: boolean): unknown }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop(true);
});

/** A receiver on a free loopback port; `answer` decides each response from the request count (1-based). */
function receiver(answer: (n: number, req: Request) => Response | Promise<Response>) {
  const seen: Seen[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        const body = await req.text();
        seen.push({
          id: req.headers.get("webhook-id") ?? "",
          timestamp: req.headers.get("webhook-timestamp") ?? "",
          signature: req.headers.get("webhook-signature") ?? "",
          body,
          contentType: req.headers.get("content-type"),
        });
        for (const w of waiting.filter((w) => seen.length >= w.count)) {
          waiting.splice(waiting.indexOf(w), 1);
          w.resolve();
        }
        return await answer(seen.length, req);
      } finally {
        inFlight--;
      }
    },
  });
  servers.push(server);
  /** Resolves once `count` requests have arrived. */
  const arrived = (count: number) => new Promise<void>((resolve) => (seen.length >= count ? resolve() : waiting.push({ count, resolve })));
  return { url: new URL(`http://127.0.0.1:${server.port}/hooks/alerts`), seen, arrived, maxInFlight: () => maxInFlight };
}

/** A clock the test moves by hand; it starts at the real time so the library's 5-minute window holds. */
function manualClock() {
  let now = Date.now();
  return { now: () => now, advanceTo: (at: number) => (now = Math.max(now, at)), advance: (ms: number) => (now += ms) };
}

function loop(outbox: MemoryAlertOutbox, url: URL, extra: Partial<AlertDeliveryOptions> = {}) {
  const reports: AttemptReport[] = [];
  const delivery = new AlertDelivery({ url, secret, signer, outbox, random: () => 0, onAttempt: (r) => reports.push(r), ...extra });
  return { delivery, reports };
}

/** Every request a genuine delivery: v1 by the reference library, v1a by the public JWKS. */
function expectSigned(seen: Seen[], nowMs: number) {
  for (const s of seen) {
    const headers = { "webhook-id": s.id, "webhook-timestamp": s.timestamp, "webhook-signature": s.signature };
    expect(new Webhook(SECRET_TEXT).verify(s.body, headers)).toEqual(JSON.parse(BODY));
    expect(verifyWebhookV1a(headers, s.body, jwks, nowMs)).toMatchObject({ ok: true, kid: key.kid });
    expect(s.contentType).toBe("application/json");
  }
}

describeAlertOutboxContract("in memory (the tests' reference)", () => {
  const outbox = new MemoryAlertOutbox();
  return { outbox, add: (id, body, at) => outbox.add(id, body, at) };
});

describe("alert delivery", () => {
  test("a receiver that fails twice then succeeds gets the alert three times under one id, on the back-off schedule", async () => {
    const r = receiver((n) => new Response(n <= 2 ? "busy" : "ok", { status: n <= 2 ? 500 : 200 }));
    const clock = manualClock();
    const outbox = new MemoryAlertOutbox();
    outbox.add("alrt_0123456789abcdef", BODY, clock.now());
    const { delivery, reports } = loop(outbox, r.url, { now: clock.now });

    const first = await delivery.runOnce();
    // random() = 0 draws the shortest jitter: 0.8 × 5 s.
    expect(first).toEqual([{ id: "alrt_0123456789abcdef", attempt: 1, ok: false, status: 500, error: "HTTP 500", nextAtMs: clock.now() + 4000 }]);
    expect(await delivery.runOnce()).toEqual([]);
    clock.advance(3999);
    expect(await delivery.runOnce()).toEqual([]);
    clock.advance(1);
    expect((await delivery.runOnce())[0]).toMatchObject({ attempt: 2, ok: false, status: 500, nextAtMs: clock.now() + 0.8 * RETRY_DELAYS_MS[1]! });
    clock.advanceTo(reports[1]!.nextAtMs!);
    expect((await delivery.runOnce())[0]).toMatchObject({ attempt: 3, ok: true, status: 200, error: null, nextAtMs: null });
    expect(await delivery.runOnce()).toEqual([]);

    expect(r.seen.map((s) => s.id)).toEqual(["alrt_0123456789abcdef", "alrt_0123456789abcdef", "alrt_0123456789abcdef"]);
    expect(new Set(r.seen.map((s) => s.body))).toEqual(new Set([BODY]));
    // Each attempt carries its own timestamp (and so its own signatures).
    expect(new Set(r.seen.map((s) => s.timestamp)).size).toBe(3);
    expectSigned(r.seen, clock.now());
    expect(outbox.rows.get("alrt_0123456789abcdef")).toMatchObject({ attempts: 2, lastError: "HTTP 500", deliveredAtMs: clock.now() });
  });

  test("a receiver that never answers is cut at the deadline and retried later", async () => {
    const r = receiver(() => new Promise<Response>(() => {}));
    const clock = manualClock();
    const outbox = new MemoryAlertOutbox();
    outbox.add("alrt_hang", BODY, clock.now());
    const { delivery } = loop(outbox, r.url, { now: clock.now, deadlineMs: 300 });
    const started = performance.now();
    const [report] = await delivery.runOnce();
    const took = performance.now() - started;
    expect(report).toMatchObject({ id: "alrt_hang", ok: false, status: null, error: "no answer within 300 ms" });
    expect(report!.nextAtMs).toBe(clock.now() + 4000);
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(5000);
    expect(r.seen).toHaveLength(1);
  });

  test("a body sent a byte at a time is cut at the deadline too", async () => {
    const r = receiver(
      () =>
        new Response(
          new ReadableStream({
            async pull(c) {
              await Bun.sleep(50);
              c.enqueue(new Uint8Array([0x20]));
            },
          }),
          { status: 500 },
        ),
    );
    const outbox = new MemoryAlertOutbox();
    outbox.add("alrt_dribble", BODY, Date.now());
    const { delivery } = loop(outbox, r.url, { deadlineMs: 400 });
    const [report] = await delivery.runOnce();
    expect(report).toMatchObject({ ok: false, status: null, error: "no answer within 400 ms" });
  });

  test("a redirect is a failure and is not followed", async () => {
    const target = receiver(() => new Response("ok"));
    for (const status of [301, 302, 307, 308]) {
      const r = receiver(() => new Response(null, { status, headers: { location: target.url.href } }));
      const outbox = new MemoryAlertOutbox();
      outbox.add("alrt_redirect", BODY, Date.now());
      const { delivery } = loop(outbox, r.url);
      const [report] = await delivery.runOnce();
      expect(report).toMatchObject({ ok: false, status, error: `redirect not followed (HTTP ${status})` });
      expect(r.seen).toHaveLength(1);
    }
    expect(target.seen).toHaveLength(0);
  });

  test("a restart delivers what was pending under the same id: after a failed attempt, and after a desk that died mid-attempt", async () => {
    const clock = manualClock();
    const outbox = new MemoryAlertOutbox();
    outbox.add("alrt_failed", BODY, clock.now());
    outbox.add("alrt_cut", BODY, clock.now());
    const down = receiver((_n, req) => (req.headers.get("webhook-id") === "alrt_cut" ? new Promise<Response>(() => {}) : new Response(null, { status: 503 })));
    let recorded: () => void = () => {};
    const failedRecorded = new Promise<void>((resolve) => (recorded = resolve));
    const first = loop(outbox, down.url, { now: clock.now, pollMs: 60_000, onAttempt: (report) => report.id === "alrt_failed" && recorded() });
    first.delivery.start();
    // Once the 503 is recorded and alrt_cut has reached the receiver, stop the desk mid-attempt.
    await Promise.all([failedRecorded, down.arrived(2)]);
    await first.delivery.stop();
    expect(outbox.rows.get("alrt_failed")).toMatchObject({ attempts: 1, lastError: "HTTP 503" });
    expect(outbox.rows.get("alrt_cut")).toMatchObject({ attempts: 0, deliveredAtMs: null });

    const up = receiver(() => new Response("ok"));
    const second = loop(outbox, up.url, { now: clock.now });
    // The cut attempt keeps its lease (deadline + margin) and the failed one its back-off.
    expect(await second.delivery.runOnce()).toEqual([]);
    clock.advance(15_000 + 5_000);
    const reports = await second.delivery.runOnce();
    expect(reports.map((r) => [r.id, r.attempt, r.ok])).toEqual([
      ["alrt_failed", 2, true],
      ["alrt_cut", 1, true],
    ]);
    expect(up.seen.map((s) => s.id).sort()).toEqual(["alrt_cut", "alrt_failed"]);
    expectSigned(up.seen, clock.now());
  });

  test("two loops on one outbox never deliver an alert twice or at once", async () => {
    const r = receiver(async () => {
      await Bun.sleep(30);
      return new Response("ok");
    });
    const outbox = new MemoryAlertOutbox();
    const ids = Array.from({ length: 24 }, (_, i) => `alrt_${String(i).padStart(16, "0")}`);
    for (const id of ids) outbox.add(id, BODY, Date.now());
    const delivered: string[] = [];
    let resolveAll: () => void = () => {};
    const all = new Promise<void>((resolve) => (resolveAll = resolve));
    const onAttempt = (report: AttemptReport) => {
      if (report.ok) delivered.push(report.id);
      if (delivered.length === ids.length) resolveAll();
    };
    const a = new AlertDelivery({ url: r.url, secret, signer, outbox, batch: 3, pollMs: 1, onAttempt });
    const b = new AlertDelivery({ url: r.url, secret, signer, outbox, batch: 3, pollMs: 1, onAttempt });
    a.start();
    b.start();
    await all;
    await Promise.all([a.stop(), b.stop()]);
    expect(delivered.sort()).toEqual(ids);
    expect(r.seen.map((s) => s.id).sort()).toEqual(ids);
    expect(r.maxInFlight()).toBeGreaterThan(1);
  });

  test("the give-up point: the 10th failure, 75 h 35 min 5 s after the first attempt at the middle of the jitter", async () => {
    const r = receiver(() => new Response(null, { status: 500 }));
    const clock = manualClock();
    const t0 = clock.now();
    const outbox = new MemoryAlertOutbox();
    outbox.add("alrt_doomed", BODY, t0);
    const { delivery, reports } = loop(outbox, r.url, { now: clock.now, random: () => 0.5 });
    for (let i = 0; i < 10; i++) {
      const [report] = await delivery.runOnce();
      expect(report!.attempt).toBe(i + 1);
      if (report!.nextAtMs !== null) clock.advanceTo(report!.nextAtMs);
    }
    expect(reports.map((x) => x.nextAtMs === null)).toEqual([false, false, false, false, false, false, false, false, false, true]);
    expect(clock.now() - t0).toBe((75 * 3600 + 35 * 60 + 5) * 1000);
    clock.advance(365 * 24 * 3600 * 1000);
    expect(await delivery.runOnce()).toEqual([]);
    expect(r.seen).toHaveLength(10);
    expect(outbox.rows.get("alrt_doomed")).toMatchObject({ attempts: 10, lastError: "HTTP 500" });
  });

  test("410 Gone gives up at once; Retry-After lengthens the wait; a refused connection is retried", async () => {
    const gone = receiver(() => new Response(null, { status: 410 }));
    const o1 = new MemoryAlertOutbox();
    o1.add("alrt_gone", BODY, Date.now());
    expect((await loop(o1, gone.url).delivery.runOnce())[0]).toMatchObject({ ok: false, status: 410, error: "HTTP 410", nextAtMs: null });

    const clock = manualClock();
    const later = receiver(() => new Response(null, { status: 503, headers: { "retry-after": "120" } }));
    const o2 = new MemoryAlertOutbox();
    o2.add("alrt_later", BODY, clock.now());
    expect((await loop(o2, later.url, { now: clock.now }).delivery.runOnce())[0]).toMatchObject({ status: 503, nextAtMs: clock.now() + 120_000 });

    const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    const port = closed.port;
    closed.stop(true);
    const o3 = new MemoryAlertOutbox();
    o3.add("alrt_refused", BODY, clock.now());
    const [refused] = await loop(o3, new URL(`http://127.0.0.1:${port}/`), { now: clock.now }).delivery.runOnce();
    expect(refused).toMatchObject({ ok: false, status: null, nextAtMs: clock.now() + 4000 });
    expect(refused!.error).toStartWith("transport error");
  });

  test("an endless answer body is read only up to the cap", async () => {
    const r = receiver(
      () =>
        new Response(
          new ReadableStream({
            pull(c) {
              c.enqueue(new Uint8Array(64 * 1024));
            },
          }),
        ),
    );
    const outbox = new MemoryAlertOutbox();
    outbox.add("alrt_big", BODY, Date.now());
    const [report] = await loop(outbox, r.url, { deadlineMs: 5000 }).delivery.runOnce();
    expect(report).toMatchObject({ ok: true, status: 200 });
  });

  test("poke wakes a resting loop at once", async () => {
    const r = receiver(() => new Response("ok"));
    const outbox = new MemoryAlertOutbox();
    let delivered: () => void = () => {};
    const done = new Promise<void>((resolve) => (delivered = resolve));
    const delivery = new AlertDelivery({ url: r.url, secret, signer, outbox, pollMs: 600_000, onAttempt: (x) => x.ok && delivered() });
    delivery.start();
    await delivery.runOnce();
    outbox.add("alrt_poked", BODY, Date.now());
    delivery.poke();
    await done;
    await delivery.stop();
    expect(r.seen.map((s) => s.id)).toEqual(["alrt_poked"]);
  });
});
