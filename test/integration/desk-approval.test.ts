// Calls above a key's approve_above_mc wait for a person (SPEC 8.3, "Calls that wait for a
// person"), through the desk's fetch handler against a real MCP upstream and an approver behind
// the desk's port that signs real decision records: 202 and a reservation, the repeat in each
// state, the one use, the binding checks, the refunds, the sweep, and no upstream call where
// none may happen (the upstream's own counter).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { APPROVAL_USE_MS } from "../../src/core/desk/limits.ts";
import { type Envelope, type Jwks, paramsSha256, ReceiptKeys, verifyChain, verifyResponse } from "../../src/core/receipt/index.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { testSigningKey } from "../helpers/decision-signer.ts";
import { FakeApprover } from "../helpers/fake-approver.ts";
import { jwksOf } from "../../src/core/receipt/index.ts";
import { makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";

const clock = manualClock("2026-12-01T10:00:00.000Z");
const approver = new FakeApprover(clock.now);
let fx: UpstreamFixture;
let t: TestDesk;
let jwks: Jwks;

const ALLOW = ["fx__echo", "fx__add", "fx__fail_5xx", "fx__hang"];
const PRICE = 5000;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ALLOW, priceMc: PRICE, upstreamCostMc: 1000 }, { now: clock.now, approver: approver.connection() });
  jwks = (await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json()) as Jwks;
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

afterEach(() => {
  approver.down = false;
});

/** A call, with `x-clearing-approval` when `approvalId` is given. */
function call(secret: string, tool: string, args: unknown, approvalId?: string): Promise<Response> {
  return t.handler(
    new Request(`http://desk.test/v1/tools/${tool}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${secret}`,
        "content-type": "application/json",
        ...(approvalId === undefined ? {} : { "x-clearing-approval": approvalId }),
      },
      body: JSON.stringify(args),
    }),
  );
}

const spent = async (keyId: string) => (await t.ledger.keys.get(keyId))!.spentMc;
const openReservations = () => t.ledger.testOnlyDatabase().query("SELECT count(*) AS n FROM reservations WHERE state = 'open'").get() as { n: number };

async function expectNoUpstreamCall<T>(fn: () => Promise<T>): Promise<T> {
  const before = fx.totalCalls();
  const out = await fn();
  expect(fx.totalCalls()).toBe(before);
  return out;
}

/** A key whose calls above `threshold` wait for a person. */
const keyAbove = (threshold: number | null, budget = 100_000) => t.makeKey({ budget_mc: budget, reset: "none", allow: ALLOW, approve_above_mc: threshold });

/** A call priced above the threshold, answered 202: its approval id. */
async function pending(secret: string, args: unknown = { text: "buy" }): Promise<string> {
  const r = await call(secret, "fx__echo", args);
  expect(r.status).toBe(202);
  const body = (await r.json()) as { error: string; approval_id: string; expires_at: string };
  expect(body.error).toBe("APPROVAL_PENDING");
  expect(r.headers.get("x-clearing-approval-id")).toBe(body.approval_id);
  return body.approval_id;
}

const approverJwks = () => approver.jwks;

describe("the threshold", () => {
  test("a call at or below approve_above_mc, and every call of a key without one, clears at once and asks nobody", async () => {
    for (const threshold of [PRICE, null]) {
      const k = await keyAbove(threshold);
      const asked = approver.asks.size;
      const r = await call(k.secret, "fx__echo", { text: "hi" });
      expect(r.status).toBe(200);
      const body = (await r.json()) as { receipt: Envelope };
      expect(body.receipt.receipt.v).toBe(1);
      expect(approver.asks.size).toBe(asked);
    }
  });

  test("above it: checks as usual, the price reserved, a spend ask sent, 202 with the approval id and expiry, no upstream call", async () => {
    const k = await keyAbove(PRICE - 1);
    const args = { text: "a large purchase" };
    const r = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", args));
    expect(r.status).toBe(202);
    const body = (await r.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(["approval_id", "error", "expires_at"]);
    expect(body.error).toBe("APPROVAL_PENDING");
    expect(r.headers.get("x-clearing-approval-id")).toBe(body.approval_id as string);
    expect(r.headers.get("x-clearing-outcome")).toBe("approval_pending");
    expect(r.headers.get("x-clearing-receipt-id")).toBeNull();
    expect(await spent(k.keyId)).toBe(PRICE);
    const ask = approver.asks.get(body.approval_id as string)!;
    expect(body.expires_at).toBe(new Date(ask.expiresAt).toISOString());
    expect(ask.ask).toMatchObject({
      tool: "fx__echo",
      price_mc: PRICE,
      key_id: k.keyId,
      org_id: k.orgId,
      org_name: "acme",
      params_sha256: paramsSha256(args),
      preview: JSON.stringify(args),
      preview_cut: false,
    });
    // The person reads exactly what the desk will pass on: the preview hashes to params_sha256.
    expect(sha256Hex(ask.ask.preview)).toBe(ask.ask.params_sha256);
  });

  test("GET /v1/tools says which of the key's tools wait for a person", async () => {
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["fx__echo", "fx__add"], prices: { fx__add: 100 }, approve_above_mc: 1000 });
    const r = await t.handler(new Request("http://desk.test/v1/tools", { headers: { authorization: `Bearer ${k.secret}` } }));
    const { tools } = (await r.json()) as { tools: { name: string; approval_needed: boolean }[] };
    expect(Object.fromEntries(tools.map((x) => [x.name, x.approval_needed]))).toEqual({ fx__echo: true, fx__add: false });
  });

  test("the usual checks come first: unknown tool, bad arguments, not allowed and no room never reach the approver", async () => {
    const k = await t.makeKey({ budget_mc: PRICE - 1, reset: "none", allow: ["fx__echo"], approve_above_mc: 0 });
    const asked = approver.asks.size;
    expect((await call(k.secret, "fx__nope", {})).status).toBe(404);
    expect((await call(k.secret, "fx__echo", { text: 1 })).status).toBe(400);
    expect((await call(k.secret, "fx__add", { a: 1, b: 2 })).status).toBe(403);
    expect((await call(k.secret, "fx__echo", { text: "x" })).status).toBe(402);
    expect(approver.asks.size).toBe(asked);
  });

  test("a long preview is cut after 500 code points, never inside a surrogate pair", async () => {
    const k = await keyAbove(0);
    const args = { text: `${"x".repeat(490)}${"😀".repeat(20)}` };
    await pending(k.secret, args);
    const ask = approver.last();
    expect(ask.preview_cut).toBe(true);
    expect([...ask.preview].length).toBe(500);
    expect(ask.preview.isWellFormed()).toBe(true);
    expect(JSON.stringify(args).startsWith(ask.preview)).toBe(true);
  });

  test("the approver unreachable: 503 APPROVER_UNAVAILABLE, nothing reserved, nothing counted; calls below the threshold unaffected", async () => {
    const k = await keyAbove(PRICE - 1);
    const small = await keyAbove(PRICE);
    const before = openReservations().n;
    approver.down = true;
    for (let i = 0; i < 25; i++) {
      const r = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", { text: "x" }));
      expect(r.status).toBe(503);
      expect(await r.json()).toEqual({ error: "APPROVER_UNAVAILABLE" });
      expect(r.headers.get("x-clearing-outcome")).toBe("refused_approver_unavailable");
    }
    expect(await spent(k.keyId)).toBe(0);
    expect(openReservations().n).toBe(before);
    // 25 refusals, and the key is not shut by the failure limit: not the agent's doing.
    expect((await t.ledger.keys.get(k.keyId))!.failCount).toBe(0);
    expect((await call(small.secret, "fx__echo", { text: "x" })).status).toBe(200);
    approver.down = false;
    expect((await call(k.secret, "fx__echo", { text: "x" })).status).toBe(202);
  });

  test("a card number in the arguments the person would read: 400 CARD_NUMBER_REFUSED, never sent, nothing reserved", async () => {
    const k = await keyAbove(0);
    const asked = approver.asks.size;
    // A random float's digits can hold a Luhn-valid run as well as a card can: both are refused.
    for (const text of ["pay with 4111 1111 1111 1111", "0.4111111111111111"]) {
      const r = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", { text }));
      expect(r.status).toBe(400);
      expect(await r.json()).toEqual({ error: "CARD_NUMBER_REFUSED" });
    }
    expect(approver.asks.size).toBe(asked);
    expect(await spent(k.keyId)).toBe(0);
  });

  test("a desk without an approver refuses such calls 503 before anything is reserved", async () => {
    const bare = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: PRICE, upstreamCostMc: 0 }, { now: clock.now });
    try {
      const k = await bare.makeKey({ budget_mc: 100_000, reset: "none", allow: ["fx__echo"], approve_above_mc: 1 });
      const r = await bare.call(k.secret, "fx__echo", { text: "x" });
      expect(r.status).toBe(503);
      expect(await r.json()).toEqual({ error: "APPROVER_UNAVAILABLE" });
      expect((await bare.ledger.keys.get(k.keyId))!.spentMc).toBe(0);
    } finally {
      await bare[Symbol.asyncDispose]();
    }
  });
});

describe("the repeat", () => {
  test("pending → 202 again; approved → the upstream called once, charged, a receipt v2 binding the decision that verifies with both key sets", async () => {
    const k = await keyAbove(0);
    const args = { text: "approve me" };
    const id = await pending(k.secret, args);
    const again = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", args, id));
    expect(again.status).toBe(202);
    expect(((await again.json()) as { approval_id: string }).approval_id).toBe(id);
    clock.advance(1000);
    approver.decide(id, "approved");
    clock.advance(1000);
    const before = fx.totalCalls();
    const r = await call(k.secret, "fx__echo", args, id);
    expect(r.status).toBe(200);
    expect(fx.totalCalls()).toBe(before + 1);
    expect(r.headers.get("x-clearing-approval-id")).toBe(id);
    const body = (await r.json()) as { result: unknown; receipt: Envelope };
    expect(body.receipt.receipt.v).toBe(2);
    expect(body.receipt.receipt.outcome).toBe("charged");
    expect(body.receipt.receipt.approval).toBeDefined();
    const checks = verifyResponse(body, jwks, args, approverJwks());
    expect(checks.filter((c) => !c.ok)).toEqual([]);
    expect(checks.map((c) => c.name)).toEqual(["signature", "readable_copy", "result", "params", "approver_signature", "approval"]);
    expect(await spent(k.keyId)).toBe(PRICE);
    // Another approver's key set does not verify the decision.
    const other = verifyResponse(body, jwks, args, jwksOf(testSigningKey().publicJwk()));
    expect(other.find((c) => c.name === "approver_signature")!.ok).toBe(false);

    // One use: the second repeat is 409, the upstream not called, nothing charged again.
    const second = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", args, id));
    expect(second.status).toBe(409);
    expect(((await second.json()) as { error: string }).error).toBe("APPROVAL_USED");
    expect(await spent(k.keyId)).toBe(PRICE);
  });

  test("denied → 403 APPROVAL_DENIED, refunded, a refunded_denied receipt v2; repeated, the same answer", async () => {
    const k = await keyAbove(0);
    const args = { text: "deny me" };
    const id = await pending(k.secret, args);
    approver.decide(id, "denied");
    for (let i = 0; i < 2; i++) {
      const r = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", args, id));
      expect(r.status).toBe(403);
      const body = (await r.json()) as { error: string; receipt: Envelope };
      expect(body.error).toBe("APPROVAL_DENIED");
      expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "refunded_denied", amount_mc: 0, http_status: 403 });
      expect(verifyResponse(body, jwks, args, approverJwks()).filter((c) => !c.ok && c.name !== "result")).toEqual([]);
    }
    expect(await spent(k.keyId)).toBe(0);
  });

  test("expired → 403 APPROVAL_EXPIRED, refunded, a refunded_expired receipt v2", async () => {
    const k = await keyAbove(0);
    const args = { text: "nobody decides" };
    const id = await pending(k.secret, args);
    clock.advance(11 * 60_000);
    approver.decide(id, "expired");
    const r = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", args, id));
    expect(r.status).toBe(403);
    const body = (await r.json()) as { error: string; receipt: Envelope };
    expect(body.error).toBe("APPROVAL_EXPIRED");
    expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "refunded_expired" });
    expect(verifyResponse(body, jwks, args, approverJwks()).filter((c) => !c.ok && c.name !== "result")).toEqual([]);
    expect(await spent(k.keyId)).toBe(0);
  });

  test("other arguments or another tool → 409 APPROVAL_MISMATCH, no upstream call, the approval still usable", async () => {
    const k = await keyAbove(0);
    const args = { text: "the approved one" };
    const id = await pending(k.secret, args);
    approver.decide(id, "approved");
    for (const [tool, a] of [
      ["fx__echo", { text: "another one" }],
      ["fx__echo", { text: "the approved one", extra: 1 }],
      ["fx__add", { a: 1, b: 2 }],
    ] as const) {
      const r = await expectNoUpstreamCall(() => call(k.secret, tool, a, id));
      expect(r.status).toBe(409);
      expect(((await r.json()) as { error: string }).error).toBe("APPROVAL_MISMATCH");
    }
    // The same arguments in another key order hash the same (canonical JSON): not a mismatch.
    expect((await call(k.secret, "fx__echo", { text: "the approved one" }, id)).status).toBe(200);
  });

  test("an approval is the key's own: another key's id, an unknown one and a malformed one answer as none", async () => {
    const a = await keyAbove(0);
    const b = await keyAbove(0);
    const id = await pending(a.secret, { text: "mine" });
    approver.decide(id, "approved");
    const theirs = await expectNoUpstreamCall(() => call(b.secret, "fx__echo", { text: "mine" }, id));
    expect(theirs.status).toBe(404);
    expect(await theirs.json()).toEqual({ error: "APPROVAL_UNKNOWN" });
    const unknown = await call(a.secret, "fx__echo", { text: "mine" }, "K7Q2M4XZ3A");
    expect(unknown.status).toBe(404);
    const malformed = await call(a.secret, "fx__echo", { text: "mine" }, "not an id");
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({ error: "APPROVAL_ID_INVALID" });
    expect((await call(a.secret, "fx__echo", { text: "mine" }, id)).status).toBe(200);
  });

  test("20 concurrent repeats of one approved call: exactly one reaches the upstream and is charged, the rest 409", async () => {
    const k = await keyAbove(0);
    const args = { text: "race" };
    const id = await pending(k.secret, args);
    approver.decide(id, "approved");
    const before = fx.totalCalls();
    const answers = await Promise.all(Array.from({ length: 20 }, () => call(k.secret, "fx__echo", args, id)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, ...Array(19).fill(409)]);
    expect(fx.totalCalls()).toBe(before + 1);
    expect(await spent(k.keyId)).toBe(PRICE);
  });

  test("a decision the desk cannot trust is never acted on: another key's signature, another ask, another call, a future time", async () => {
    const k = await keyAbove(0);
    const cases: [string, (f: Parameters<Parameters<FakeApprover["decide"]>[2] & object>[0]) => void][] = [
      ["ask_sha256", (f) => (f.ask_sha256 = "0".repeat(64))],
      ["price", (f) => (f.spend!.price_mc = 1)],
      ["reservation", (f) => (f.spend!.reservation_id = "res_999999")],
      ["params", (f) => (f.spend!.params_sha256 = "1".repeat(64))],
    ];
    for (const [name, change] of cases) {
      const args = { text: `forged ${name}` };
      const id = await pending(k.secret, args);
      approver.decide(id, "approved", change);
      const r = await expectNoUpstreamCall(() => call(k.secret, "fx__echo", args, id));
      expect(r.status).toBe(502);
      expect(await r.json()).toEqual({ error: "APPROVER_BAD_ANSWER" });
    }
    // Signed by a key the desk's operator did not pin.
    const stranger = new FakeApprover(clock.now);
    const pinned = await makeDeskOnFixture(
      fx.url,
      { tools: ["fx__echo"], priceMc: PRICE, upstreamCostMc: 0 },
      { now: clock.now, approver: stranger.connection(ReceiptKeys.fromJwks(approver.jwks)) },
    );
    try {
      const kk = await pinned.makeKey({ budget_mc: 100_000, reset: "none", allow: ["fx__echo"], approve_above_mc: 0 });
      const first = await pinned.call(kk.secret, "fx__echo", { text: "x" });
      const id = ((await first.json()) as { approval_id: string }).approval_id;
      stranger.decide(id, "approved");
      const r = await pinned.handler(
        new Request("http://desk.test/v1/tools/fx__echo", {
          method: "POST",
          headers: { authorization: `Bearer ${kk.secret}`, "content-type": "application/json", "x-clearing-approval": id },
          body: JSON.stringify({ text: "x" }),
        }),
      );
      expect(r.status).toBe(502);
      expect((await pinned.ledger.keys.get(kk.keyId))!.spentMc).toBe(PRICE);
      expect(pinned.logs.some((l) => l.includes("not acted on") && l.includes("signature"))).toBe(true);
    } finally {
      await pinned[Symbol.asyncDispose]();
    }
    // A decision dated after the desk's clock reads as pending: no receipt before the decision it binds.
    const args = { text: "from the future" };
    const id = await pending(k.secret, args);
    clock.advance(60_000);
    approver.decide(id, "approved");
    clock.advance(-60_000);
    expect((await call(k.secret, "fx__echo", args, id)).status).toBe(202);
    clock.advance(60_000);
    expect((await call(k.secret, "fx__echo", args, id)).status).toBe(200);
  });

  test("a decision under a kid the desk does not know makes it read its pinned keys again (a rotation), once", async () => {
    const rotated = new FakeApprover(clock.now);
    let reloads = 0;
    const connection = rotated.connection();
    const old = ReceiptKeys.fromJwks(jwksOf(testSigningKey().publicJwk()));
    const fresh = ReceiptKeys.fromJwks(rotated.jwks);
    const d = await makeDeskOnFixture(
      fx.url,
      { tools: ["fx__echo"], priceMc: PRICE, upstreamCostMc: 0 },
      {
        now: clock.now,
        approver: {
          approver: connection.approver,
          keys: {
            current: () => (reloads === 0 ? old : fresh),
            reload: () => {
              reloads++;
              return fresh;
            },
          },
        },
      },
    );
    try {
      const k = await d.makeKey({ budget_mc: 100_000, reset: "none", allow: ["fx__echo"], approve_above_mc: 0 });
      const first = await d.call(k.secret, "fx__echo", { text: "rotated" });
      const id = ((await first.json()) as { approval_id: string }).approval_id;
      rotated.decide(id, "approved");
      const r = await d.handler(
        new Request("http://desk.test/v1/tools/fx__echo", {
          method: "POST",
          headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json", "x-clearing-approval": id },
          body: JSON.stringify({ text: "rotated" }),
        }),
      );
      expect(r.status).toBe(200);
      expect(reloads).toBe(1);
    } finally {
      await d[Symbol.asyncDispose]();
    }
  });

  test("the approver down at the repeat: 503, the reservation kept, the approval still usable", async () => {
    const k = await keyAbove(0);
    const id = await pending(k.secret, { text: "later" });
    approver.decide(id, "approved");
    approver.down = true;
    const r = await call(k.secret, "fx__echo", { text: "later" }, id);
    expect(r.status).toBe(503);
    expect(await spent(k.keyId)).toBe(PRICE);
    approver.down = false;
    expect((await call(k.secret, "fx__echo", { text: "later" }, id)).status).toBe(200);
  });

  test("an approved call whose upstream fails is refunded, the receipt still binding the approval", async () => {
    const k = await keyAbove(0);
    const r0 = await call(k.secret, "fx__fail_5xx", {});
    const id = ((await r0.json()) as { approval_id: string }).approval_id;
    approver.decide(id, "approved");
    const r = await call(k.secret, "fx__fail_5xx", {}, id);
    expect(r.status).toBe(502);
    const body = (await r.json()) as { receipt: Envelope };
    expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "refunded_upstream_error" });
    expect(await spent(k.keyId)).toBe(0);
  });
});

describe("reservations nobody repeats", () => {
  test("an approved call in flight when the desk stops is refunded as abandoned at the next start, the receipt binding the approval", async () => {
    const k = await keyAbove(0);
    const r0 = await call(k.secret, "fx__hang", {});
    const id = ((await r0.json()) as { approval_id: string }).approval_id;
    approver.decide(id, "approved");
    const inFlight = call(k.secret, "fx__hang", {}, id);
    await fx.whenHanging(1);
    // What a restart's sweep does: every call in flight is abandoned, a claimed approval's too.
    expect(await t.desk.sweepAbandoned(Number.POSITIVE_INFINITY)).toBe(1);
    fx.release();
    const r = await inFlight;
    expect(r.status).toBe(504);
    const body = (await r.json()) as { error: string; receipt: Envelope };
    expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "refunded_abandoned" });
    expect(verifyResponse(body, jwks, {}, approverJwks()).filter((c) => !c.ok && c.name !== "result")).toEqual([]);
    expect(await spent(k.keyId)).toBe(0);
    // The approval was used: it lets nothing else through.
    expect((await call(k.secret, "fx__hang", {}, id)).status).toBe(409);
  });

  test("the sweep settles them once the approval can no longer be used, as the decision says; a restart keeps them", async () => {
    const k = await keyAbove(0);
    const ids = {
      denied: await pending(k.secret, { text: "d" }),
      expired: await pending(k.secret, { text: "e" }),
      approved: await pending(k.secret, { text: "a" }),
      unreachable: await pending(k.secret, { text: "u" }),
    };
    approver.decide(ids.denied, "denied");
    approver.decide(ids.approved, "approved");
    expect(await spent(k.keyId)).toBe(4 * PRICE);
    // A restart's sweep refunds calls in flight, never calls waiting for a person.
    expect(await t.desk.sweepAbandoned(Number.POSITIVE_INFINITY)).toBe(0);
    expect(await t.desk.sweepApprovals()).toBe(0);
    clock.advance(10 * 60_000 + APPROVAL_USE_MS + 1);
    approver.decide(ids.expired, "expired");
    // The fourth one's decision cannot be read: it is still refunded (abandoned), nothing stays held.
    approver.asks.delete(ids.unreachable);
    // (Calls other tests left waiting are settled by the same sweep.)
    expect(await t.desk.sweepApprovals()).toBeGreaterThanOrEqual(4);
    expect(await spent(k.keyId)).toBe(0);
    const receipts = (await t.desk.keyReceipts((await t.ledger.keys.get(k.keyId))!, 0, 100)).receipts.map((r) => JSON.parse(r.envelope) as Envelope);
    expect(receipts.map((r) => `${r.receipt.outcome} v${r.receipt.v}`).sort()).toEqual([
      "refunded_abandoned v1",
      "refunded_abandoned v2",
      "refunded_denied v2",
      "refunded_expired v2",
    ]);
    expect(verifyChain(receipts).failures).toEqual([]);
    // The repeat of a swept approval answers as it was settled.
    const late = await call(k.secret, "fx__echo", { text: "a" }, ids.approved);
    expect(late.status).toBe(403);
    expect(((await late.json()) as { error: string }).error).toBe("APPROVAL_EXPIRED");
    expect(await t.desk.sweepApprovals()).toBe(0);
  });
});

describe("approve_above_mc on the operator API", () => {
  test("set at creation and by PATCH, null for never, shown in the key view; bad values refused", async () => {
    const k = await keyAbove(null);
    const view = async () => (await (await t.admin("GET", `/admin/keys/${k.keyId}`)).json()) as { approve_above_mc: number | null };
    expect((await view()).approve_above_mc).toBeNull();
    expect((await t.admin("PATCH", `/admin/keys/${k.keyId}`, { approve_above_mc: 2500 })).status).toBe(200);
    expect((await view()).approve_above_mc).toBe(2500);
    expect((await call(k.secret, "fx__echo", { text: "x" })).status).toBe(202);
    expect((await t.admin("PATCH", `/admin/keys/${k.keyId}`, { approve_above_mc: null })).status).toBe(200);
    expect((await view()).approve_above_mc).toBeNull();
    expect((await call(k.secret, "fx__echo", { text: "x" })).status).toBe(200);
    for (const bad of [-1, 1.5, "100", true, 2 ** 53]) {
      const r = await t.admin("PATCH", `/admin/keys/${k.keyId}`, { approve_above_mc: bad });
      expect(r.status).toBe(400);
      expect(await r.json()).toEqual({ error: "VALUE_INVALID", field: "approve_above_mc" });
    }
  });
});
