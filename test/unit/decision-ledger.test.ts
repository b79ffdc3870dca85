// Decisions as the ask ledger records them: every decision, expiry and step outcome gets its
// signed record in the transaction that makes it, in one gapless chain; a step is recorded
// before it runs and can never start twice; a step cut off by a stop becomes failed/interrupted.
// Every record is checked with the verifier a third party uses (core/decision/verify.ts).
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { askObject, type PayAsk, type SpendAsk } from "../../src/core/asks.ts";
import { type DecisionFields, decisionProblem } from "../../src/core/decision/record.ts";
import { decisionSigner } from "../../src/core/decision/sign.ts";
import { DecisionChain, openDecision } from "../../src/core/decision/verify.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { hashJson, sha256Hex } from "../../src/core/receipt/hash.ts";
import { jwksOf, ReceiptInvalidError } from "../../src/core/receipt/sign.ts";
import { ReceiptKeys } from "../../src/core/receipt/verify.ts";
import { RECAP, TEST_KEY, TEST_SIGNER, testSigningKey } from "../helpers/decision-signer.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";
import { tempDir } from "../helpers/tmp.ts";

const T0 = Date.UTC(2026, 10, 30, 9, 0, 0);
const TTL = 600_000;
const OPTS = { ttlMs: TTL, maxPending: 50 };
const KEYS = ReceiptKeys.fromJwks(jwksOf(TEST_KEY.publicJwk()));

const pay = (approval_id: string): PayAsk => ({ kind: "pay", approval_id, ...PAY_FIELDS });
const SPEND: SpendAsk = {
  kind: "spend",
  approval_id: "SPEND00000",
  reservation_id: "res_1",
  tool: "everything__echo",
  price_mc: 1500,
  key_id: "key_1",
  key_name: "research-agent",
  org_id: "org_1",
  org_name: "acme",
  params_sha256: "a".repeat(64),
  preview: '{"message":"hi"}',
  preview_cut: true,
};

function open() {
  const clock = { ms: T0 };
  const ledger = AskLedger.open(":memory:", () => new Date(clock.ms), TEST_SIGNER);
  return { clock, ledger };
}

/** Every record of the ledger passes the verifier, and the chain holds. */
function verifiedRecords(ledger: AskLedger) {
  const chain = new DecisionChain();
  const records = [...ledger.decisionRecords()];
  records.forEach((envelope, i) => {
    const opened = openDecision(envelope, KEYS);
    expect(opened.checks.map((c) => c.ok)).toEqual([true, true]);
    chain.add(i + 1, opened.signed, opened.payloadSha256);
  });
  expect(chain.failures).toEqual([]);
  return records.map((r) => r.decision);
}

describe("a decision and its record, in one transaction", () => {
  test("approve and deny: the record names the ask, its hash, the recap hash, the decision and its time", () => {
    const { clock, ledger } = open();
    ledger.create(pay("K7Q2M4XZ3A"), OPTS);
    ledger.create(pay("0000000001"), OPTS);
    clock.ms += 5000;
    const approved = ledger.decide("K7Q2M4XZ3A", "approved", { ref: "demo-3e40a688", recapSha256: RECAP });
    expect(approved.ok).toBe(true);
    const recap2 = sha256Hex("another recap\n");
    clock.ms += 1000;
    ledger.decide("0000000001", "denied", { recapSha256: recap2 });
    const [first, second] = verifiedRecords(ledger);
    expect(first).toEqual({
      v: 1,
      kid: TEST_KEY.kid,
      seq: 1,
      prev_sha256: null,
      approval_id: "K7Q2M4XZ3A",
      verb: "pay",
      ask_sha256: hashJson(askObject(pay("K7Q2M4XZ3A"))),
      recap_sha256: RECAP,
      decision: "approved",
      ref: "demo-3e40a688",
      decided_at: new Date(T0 + 5000).toISOString(),
      recorded_at: new Date(T0 + 5000).toISOString(),
      spend: null,
    });
    expect(second).toMatchObject({ seq: 2, approval_id: "0000000001", decision: "denied", ref: null, recap_sha256: recap2 });
    // The envelope the API serves is the record the ledger signed, and its ok is the ledger's.
    expect(ledger.decisionRecord("K7Q2M4XZ3A")).toEqual(approved.ok ? approved.record.envelope : undefined);
    expect(ledger.decisionRecord("PAYPAYPAY0")).toBeUndefined();
  });

  test("ask_sha256 covers the stored ask: the verb and every field, so another amount hashes apart", () => {
    expect(hashJson(askObject(pay("K7Q2M4XZ3A")))).not.toBe(hashJson(askObject({ ...pay("K7Q2M4XZ3A"), amount: "19.01" })));
    expect(askObject(SPEND)).toEqual({ verb: "spend", ...Object.fromEntries(Object.entries(SPEND).filter(([k]) => k !== "kind")) });
  });

  test("the desk's ask: approved without a ref, the record binds its call", () => {
    const { ledger } = open();
    ledger.create(SPEND, OPTS);
    expect(() => ledger.decide("SPEND00000", "approved", { ref: "demo-00000000", recapSha256: RECAP })).toThrow(TypeError);
    const r = ledger.decide("SPEND00000", "approved", { recapSha256: RECAP });
    expect(r.ok && r.stored).toMatchObject({ state: "approved" });
    expect(r.ok && "ref" in r.stored).toBe(false);
    expect(verifiedRecords(ledger)[0]).toMatchObject({
      verb: "spend",
      ref: null,
      spend: { reservation_id: "res_1", tool: "everything__echo", price_mc: 1500, key_id: "key_1", org_id: "org_1", params_sha256: "a".repeat(64) },
    });
    expect(() => ledger.startStep("SPEND00000", RECAP)).not.toThrow();
  });

  test("a signer that refuses a record writes no decision either", () => {
    const { ledger } = open();
    ledger.create(pay("K7Q2M4XZ3A"), OPTS);
    expect(() => ledger.decide("K7Q2M4XZ3A", "approved", { ref: "demo-3e40a688", recapSha256: "not a hash" })).toThrow(ReceiptInvalidError);
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
    expect([...ledger.decisionRecords()]).toEqual([]);
  });

  test("a ledger opened without a signer stores asks but cannot decide", () => {
    const ledger = AskLedger.open(":memory:", () => new Date(T0));
    ledger.create(pay("K7Q2M4XZ3A"), OPTS);
    expect(() => ledger.decide("K7Q2M4XZ3A", "denied", { recapSha256: RECAP })).toThrow(/without a decision signer/);
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
  });
});

describe("expiry records", () => {
  test("each ask that expired undecided gets one record, decided_at its expiry, no recap; once", () => {
    const { clock, ledger } = open();
    ledger.create(pay("K7Q2M4XZ3A"), { ttlMs: 1000, maxPending: 50 });
    clock.ms += 10;
    ledger.create(pay("0000000001"), { ttlMs: 1000, maxPending: 50 });
    ledger.create(pay("0000000002"), { ttlMs: 5000, maxPending: 50 });
    ledger.decide("0000000001", "denied", { recapSha256: RECAP });
    clock.ms = T0 + 2000;
    const upTo = ledger.sealExpired();
    expect(upTo).toBe(T0 + 2000);
    ledger.sealExpired();
    ledger.sealExpired(upTo);
    const records = verifiedRecords(ledger);
    expect(records.map((r) => [r.approval_id, r.decision])).toEqual([
      ["0000000001", "denied"],
      ["K7Q2M4XZ3A", "expired"],
    ]);
    expect(records[1]).toMatchObject({
      recap_sha256: null,
      ref: null,
      decided_at: new Date(T0 + 1000).toISOString(),
      recorded_at: new Date(T0 + 2000).toISOString(),
    });
    // Deciding it now is refused, and changes nothing.
    expect(ledger.decide("K7Q2M4XZ3A", "approved", { ref: "demo-3e40a688", recapSha256: RECAP })).toEqual({ ok: false, reason: "expired" });
    clock.ms = T0 + 6000;
    ledger.sealExpired(upTo);
    expect(verifiedRecords(ledger).map((r) => r.approval_id)).toEqual(["0000000001", "K7Q2M4XZ3A", "0000000002"]);
  });

  test("nextExpiry is the earliest expiry of an ask awaiting a person", () => {
    const { clock, ledger } = open();
    expect(ledger.nextExpiry()).toBeUndefined();
    ledger.create(pay("K7Q2M4XZ3A"), { ttlMs: 5000, maxPending: 50 });
    ledger.create(pay("0000000001"), { ttlMs: 2000, maxPending: 50 });
    expect(ledger.nextExpiry()).toEqual(new Date(T0 + 2000));
    ledger.decide("0000000001", "denied", { recapSha256: RECAP });
    expect(ledger.nextExpiry()).toEqual(new Date(T0 + 5000));
    clock.ms = T0 + 5000;
    expect(ledger.nextExpiry()).toBeUndefined();
  });
});

describe("the step behind an approval", () => {
  test("started before it runs: the ask is no longer awaiting a person, reads pending, and does not expire", () => {
    const { clock, ledger } = open();
    ledger.create(pay("K7Q2M4XZ3A"), { ttlMs: 1000, maxPending: 1 });
    clock.ms += 100;
    const started = ledger.startStep("K7Q2M4XZ3A", RECAP);
    expect(started.ok && started.stored).toMatchObject({ state: "pending", step_started_at: new Date(T0 + 100) });
    expect(ledger.listPending()).toEqual([]);
    // The cap counts asks awaiting a person: the next ask fits.
    expect(ledger.create(pay("0000000001"), { ttlMs: 1000, maxPending: 1 }).ok).toBe(true);
    clock.ms = T0 + 60_000;
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
    ledger.sealExpired();
    expect(ledger.decisionRecord("K7Q2M4XZ3A")).toBeUndefined();
    // Neither a decision nor a second start can be taken meanwhile.
    expect(ledger.startStep("K7Q2M4XZ3A", RECAP)).toEqual({ ok: false, reason: "running" });
    expect(ledger.decide("K7Q2M4XZ3A", "denied", { recapSha256: RECAP })).toEqual({ ok: false, reason: "running" });
    const done = ledger.finishStep("K7Q2M4XZ3A", { decision: "approved", ref: "PAY_123" });
    expect(done.ok && done.stored).toMatchObject({ state: "approved", ref: "PAY_123", decided_at: new Date(T0 + 100) });
    expect(verifiedRecords(ledger).find((r) => r.approval_id === "K7Q2M4XZ3A")).toMatchObject({
      decision: "approved",
      ref: "PAY_123",
      recap_sha256: RECAP,
      decided_at: new Date(T0 + 100).toISOString(),
      recorded_at: new Date(T0 + 60_000).toISOString(),
    });
    expect(ledger.finishStep("K7Q2M4XZ3A", { decision: "failed", ref: "timeout" })).toEqual({ ok: false, reason: "decided" });
  });

  test("a failed step: state failed with why as its ref; a demo- ref is not a step's", () => {
    const { ledger } = open();
    ledger.create(pay("K7Q2M4XZ3A"), OPTS);
    ledger.startStep("K7Q2M4XZ3A", RECAP);
    expect(() => ledger.finishStep("K7Q2M4XZ3A", { decision: "approved", ref: "demo-3e40a688" })).toThrow(/does not go with this ask/);
    const failed = ledger.finishStep("K7Q2M4XZ3A", { decision: "failed", ref: "exit_status" });
    expect(failed.ok && failed.stored).toMatchObject({ state: "failed", ref: "exit_status" });
    expect(verifiedRecords(ledger)[0]).toMatchObject({ decision: "failed", ref: "exit_status" });
  });

  test("no step for an unknown, expired or decided ask; none ends without having started", () => {
    const { clock, ledger } = open();
    expect(ledger.startStep("K7Q2M4XZ3A", RECAP)).toEqual({ ok: false, reason: "unknown" });
    ledger.create(pay("K7Q2M4XZ3A"), { ttlMs: 1000, maxPending: 50 });
    ledger.create(pay("0000000001"), OPTS);
    ledger.decide("0000000001", "denied", { recapSha256: RECAP });
    expect(ledger.startStep("0000000001", RECAP)).toEqual({ ok: false, reason: "decided" });
    expect(() => ledger.finishStep("K7Q2M4XZ3A", { decision: "approved", ref: "X" })).toThrow(TypeError);
    clock.ms += 1000;
    expect(ledger.startStep("K7Q2M4XZ3A", RECAP)).toEqual({ ok: false, reason: "expired" });
  });

  test("a step cut off by a stop is failed/interrupted at the next open, with its recap, and never starts again", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    const clock = { ms: T0 };
    const first = AskLedger.open(path, () => new Date(clock.ms), TEST_SIGNER);
    first.create(pay("K7Q2M4XZ3A"), OPTS);
    first.create(pay("0000000001"), OPTS);
    first.startStep("K7Q2M4XZ3A", RECAP);
    first.close();
    clock.ms += 30_000;
    const second = AskLedger.open(path, () => new Date(clock.ms), TEST_SIGNER);
    const failed = second.failInterruptedSteps();
    expect(failed.map((s) => [s.ask.approval_id, s.state, s.ref])).toEqual([["K7Q2M4XZ3A", "failed", "interrupted"]]);
    expect(second.failInterruptedSteps()).toEqual([]);
    expect(second.startStep("K7Q2M4XZ3A", RECAP)).toEqual({ ok: false, reason: "decided" });
    expect(verifiedRecords(second)).toEqual([
      expect.objectContaining({
        approval_id: "K7Q2M4XZ3A",
        decision: "failed",
        ref: "interrupted",
        recap_sha256: RECAP,
        decided_at: new Date(T0).toISOString(),
      }),
    ]);
    expect(second.get("0000000001")?.state).toBe("pending");
    second.close();
    const raw = new Database(path);
    expect(raw.query("SELECT count(*) AS n FROM steps").get()).toEqual({ n: 1 });
    raw.close();
  });
});

describe("the chain across restarts and keys", () => {
  test("records continue the chain after a restart with another key; both keys verify theirs", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    const otherKey = testSigningKey();
    const a = AskLedger.open(path, () => new Date(T0), TEST_SIGNER);
    a.create(pay("K7Q2M4XZ3A"), OPTS);
    a.create(pay("0000000001"), OPTS);
    a.rememberKey(TEST_KEY.publicJwk());
    a.decide("K7Q2M4XZ3A", "denied", { recapSha256: RECAP });
    a.close();
    const b = AskLedger.open(path, () => new Date(T0 + 1), decisionSigner(otherKey));
    b.rememberKey(otherKey.publicJwk());
    b.decide("0000000001", "denied", { recapSha256: RECAP });
    const keys = b.knownKeys();
    expect(keys.map((k) => k.kid)).toEqual([otherKey.kid, TEST_KEY.kid]);
    const both = ReceiptKeys.fromJwks(jwksOf(keys[0]!, keys.slice(1)));
    const chain = new DecisionChain();
    [...b.decisionRecords()].forEach((env, i) => {
      const opened = openDecision(env, both);
      expect(opened.checks.every((c) => c.ok)).toBe(true);
      chain.add(i, opened.signed, opened.payloadSha256);
    });
    expect(chain.failures).toEqual([]);
    expect([...b.decisionRecords()].map((e) => [e.decision.seq, e.kid])).toEqual([
      [1, TEST_KEY.kid],
      [2, otherKey.kid],
    ]);
    b.close();
  });
});

describe("the record's own rules", () => {
  const good: DecisionFields = {
    seq: 2,
    prev_sha256: "b".repeat(64),
    approval_id: "K7Q2M4XZ3A",
    verb: "pay",
    ask_sha256: "a".repeat(64),
    recap_sha256: RECAP,
    decision: "approved",
    ref: "demo-3e40a688",
    decided_at: "2026-11-30T09:00:00.000Z",
    recorded_at: "2026-11-30T09:00:00.000Z",
    spend: null,
  };
  const problem = (over: Partial<Record<keyof DecisionFields | "v" | "kid" | "extra", unknown>>) => decisionProblem({ v: 1, kid: "k", ...good, ...over });
  test("a good record passes; each rule names its field", () => {
    expect(problem({})).toBeNull();
    expect(problem({ v: 2 })).toBe("v: invalid value");
    expect(problem({ extra: 1 })).toBe("extra: unknown field");
    expect(problem({ seq: 1 })).toBe("prev_sha256: must be null exactly when seq is 1");
    expect(problem({ recap_sha256: null })).toBe("recap_sha256: must be null exactly when expired");
    expect(problem({ decision: "expired", ref: null })).toBe("recap_sha256: must be null exactly when expired");
    expect(problem({ ref: null })).toBe("ref: must be set on an approved pay or account ask");
    expect(problem({ decision: "denied" })).toBe("ref: must be null when denied");
    expect(problem({ decision: "failed", ref: "whatever" })).toBe("ref: must name why the step failed");
    expect(problem({ ref: "4111111111111111" })).toBe("ref: invalid value");
    expect(problem({ verb: "spend", ref: null })).toBe("spend: must be set exactly on a spend ask");
    expect(problem({ spend: { tool: "x" } })).toBe("spend: must be set exactly on a spend ask");
    expect(
      problem({ verb: "spend", ref: null, spend: { reservation_id: "r", tool: "a__b", price_mc: 0, key_id: "k", org_id: "o", params_sha256: "a".repeat(64) } }),
    ).toBe("spend.price_mc: invalid value");
    expect(problem({ verb: "spend", decision: "failed", ref: "timeout", spend: {} })).toBe("decision: a spend ask has no step, so it cannot fail");
    expect(problem({ decided_at: "2026-11-30T09:00:00.001Z" })).toBe("decided_at: after recorded_at");
    expect(problem({ decided_at: "2026-11-30T09:00:00Z" })).toBe("decided_at: invalid value");
  });
});
