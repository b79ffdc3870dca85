// The ledger's part of calls that wait for a person (MoneyLedger's approval methods, a key's
// approve_above_mc; core/desk/ports.ts), for every DeskLedger adapter: the SQLite ledger today,
// the PostgreSQL ledger when it implements the port. Call it with a factory of an empty ledger.
import { describe, expect, test } from "bun:test";
import { periodOf } from "../../src/core/desk/period.ts";
import type { CallContext, DeskLedger, ReceiptFacts, ReceiptMaker } from "../../src/core/desk/ports.ts";
import type { DeskKey } from "../../src/core/desk/records.ts";
import { type ApprovalEnvelope, canonicalJson, envelopeText, sha256Hex } from "../../src/core/receipt/index.ts";
import { type LedgerUnderTest, onLedger } from "./ledger-contract.ts";

const NOW = Date.parse("2026-12-01T10:00:00.000Z");
const HOUR = "2026-12-01T10";
const PRICE = 5000;
const DECISION: ApprovalEnvelope = { payload: "eyJ2IjoxfQ", signature: "s".repeat(86), kid: "approver-kid" };

/**
 * A maker that keeps the facts it was given and stores a stand-in receipt: its payload holds the
 * fields a ledger reads out of it, under a zero signature (the signature is not what this
 * contract tests).
 */
function recordingMaker(): { make: ReceiptMaker; facts: ReceiptFacts[] } {
  const facts: ReceiptFacts[] = [];
  return {
    facts,
    make: (f) => {
      facts.push(f);
      const payload = canonicalJson({
        v: 1,
        id: f.receiptId,
        kid: "desk-kid",
        issued_at: new Date(f.issuedAt).toISOString(),
        org_id: f.orgId,
        key_id: f.keyId,
        tool: f.tool,
        outcome: f.outcome,
        amount_mc: f.amountMc,
        period: f.period,
        seq: f.link.seq,
        prev_sha256: f.link.prevSha256,
      });
      const signed = { payload, signature: new Uint8Array(64) };
      return { id: f.receiptId, kid: "desk-kid", sha256: sha256Hex(payload), envelope: envelopeText(signed), issuedAt: f.issuedAt, signed };
    },
  };
}

async function keyOf(l: DeskLedger, approveAboveMc?: number | null): Promise<DeskKey> {
  const n = Math.random().toString(36).slice(2, 10);
  await l.orgs.create({ id: `org_${n}`, name: "acme", createdAt: NOW });
  await l.keys.create({
    id: `key_${n}`,
    orgId: `org_${n}`,
    name: "",
    lookup: `lk${n}`.padEnd(12, "x"),
    secretSha256: new Uint8Array(32),
    budgetMc: 100_000,
    reset: "none",
    period: periodOf("none", NOW),
    allow: ["fx__echo"],
    prices: {},
    expiresAt: null,
    ...(approveAboveMc === undefined ? {} : { approveAboveMc }),
    now: NOW,
  });
  return (await l.keys.get(`key_${n}`))!;
}

const ctxOf = (key: DeskKey, now = NOW): CallContext => ({
  key,
  tool: "fx__echo",
  priceMc: PRICE,
  upstreamCostMc: 100,
  paramsSha256: "a".repeat(64),
  now,
  hour: HOUR,
  period: periodOf(key.reset, now),
});

async function reserved(l: DeskLedger, key: DeskKey): Promise<number> {
  const r = await l.money.reserve(ctxOf(key), recordingMaker().make);
  if (r.kind !== "reserved") throw new Error(`not reserved: ${r.kind}`);
  return r.reservationId;
}

export function describeApprovalLedgerContract(name: string, make: () => Promise<LedgerUnderTest> | LedgerUnderTest): void {
  describe(`approval ledger contract: ${name}`, () => {
    // Its receipts come from a stand-in maker, not signed envelopes: desk check would refuse them.
    const withLedger = (run: (l: DeskLedger) => Promise<void>) => onLedger(make, run, { sound: false });

    test("a key's approve_above_mc: null unless given, set by a patch, kept by a patch that does not name it", () =>
      withLedger(async (l) => {
        const plain = await keyOf(l);
        expect(plain.approveAboveMc).toBeNull();
        const k = await keyOf(l, 2500);
        expect(k.approveAboveMc).toBe(2500);
        expect((await l.keys.patch(k.id, { budgetMc: 90_000 }, NOW)).approveAboveMc).toBe(2500);
        expect((await l.keys.patch(k.id, { approveAboveMc: null }, NOW)).approveAboveMc).toBeNull();
        expect((await l.keys.patch(k.id, { approveAboveMc: 0 }, NOW)).approveAboveMc).toBe(0);
      }));

    test("an asked reservation awaits: found by its approval id, never among the calls in flight, recorded once", () =>
      withLedger(async (l) => {
        const key = await keyOf(l, 0);
        const id = await reserved(l, key);
        expect(await l.money.awaitApproval(id, { approvalId: "K7Q2M4XZ3A", askSha256: "b".repeat(64), expiresAt: NOW + 600_000 })).toBe(true);
        expect(await l.money.awaitApproval(id, { approvalId: "K7Q2M4XZ3B", askSha256: "b".repeat(64), expiresAt: NOW + 600_000 })).toBe(false);
        expect(await l.money.approval("K7Q2M4XZ3A")).toEqual({
          approvalId: "K7Q2M4XZ3A",
          askSha256: "b".repeat(64),
          expiresAt: NOW + 600_000,
          reservationId: id,
          keyId: key.id,
          orgId: key.orgId,
          tool: "fx__echo",
          priceMc: PRICE,
          paramsSha256: "a".repeat(64),
          period: "none",
          stage: "awaiting",
          settled: null,
        });
        expect(await l.money.approval("K7Q2M4XZ3B")).toBeNull();
        expect(await l.money.openReservations(Number.POSITIVE_INFINITY)).not.toContain(id);
        expect((await l.money.approvalsDue(NOW + 600_000)).map((h) => h.reservationId)).not.toContain(id);
        expect((await l.money.approvalsDue(NOW + 600_001)).map((h) => h.reservationId)).toContain(id);
      }));

    test("one claim: exactly one of many succeeds; the claimed call is in flight from its claim; its settlement binds the decision", () =>
      withLedger(async (l) => {
        const key = await keyOf(l, 0);
        const id = await reserved(l, key);
        await l.money.awaitApproval(id, { approvalId: "K7Q2M4XZ3C", askSha256: "b".repeat(64), expiresAt: NOW + 600_000 });
        const claims = await Promise.all(Array.from({ length: 20 }, () => l.money.claimApproval(id, DECISION, NOW + 5000)));
        expect(claims.filter(Boolean)).toHaveLength(1);
        expect((await l.money.approval("K7Q2M4XZ3C"))!.stage).toBe("claimed");
        expect(await l.money.openReservations(NOW + 5000)).not.toContain(id);
        expect(await l.money.openReservations(NOW + 5001)).toContain(id);
        expect(await l.money.approvalsDue(Number.MAX_SAFE_INTEGER)).not.toContainEqual(expect.objectContaining({ reservationId: id }));
        const { make, facts } = recordingMaker();
        const settled = await l.money.settle({ reservationId: id, outcome: "charged", resultSha256: "c".repeat(64), now: NOW + 6000 }, make);
        expect(settled.kind).toBe("settled");
        expect(facts.at(-1)!.approval).toEqual(DECISION);
        const hold = (await l.money.approval("K7Q2M4XZ3C"))!;
        expect(hold.settled).toMatchObject({ outcome: "charged", receipt: { id: facts.at(-1)!.receiptId } });
        expect((await l.keys.get(key.id))!.spentMc).toBe(PRICE);
      }));

    test("an unclaimed one settles binding the decision given (a denial), refunded", () =>
      withLedger(async (l) => {
        const key = await keyOf(l, 0);
        const id = await reserved(l, key);
        await l.money.awaitApproval(id, { approvalId: "K7Q2M4XZ3D", askSha256: "b".repeat(64), expiresAt: NOW + 600_000 });
        const { make, facts } = recordingMaker();
        const settled = await l.money.settle({ reservationId: id, outcome: "refunded_denied", resultSha256: null, now: NOW + 1000, approval: DECISION }, make);
        expect(settled.kind).toBe("settled");
        expect(facts.at(-1)).toMatchObject({ outcome: "refunded_denied", amountMc: 0, approval: DECISION });
        expect((await l.keys.get(key.id))!.spentMc).toBe(0);
        expect(await l.money.claimApproval(id, DECISION, NOW + 2000)).toBe(false);
      }));

    test("release undoes an unasked reservation: the price back, the row gone, its failure count undone unless the refusal counts", () =>
      withLedger(async (l) => {
        const key = await keyOf(l, 0);
        const a = await reserved(l, key);
        expect((await l.keys.get(key.id))!).toMatchObject({ spentMc: PRICE, failCount: 1 });
        expect(await l.money.release(a, ctxOf(key), "refused_approver_unavailable")).toEqual({ released: true, remainingMc: 100_000 });
        expect((await l.keys.get(key.id))!).toMatchObject({ spentMc: 0, failCount: 0 });
        expect(await l.money.openReservations(Number.POSITIVE_INFINITY)).not.toContain(a);
        expect((await l.money.release(a, ctxOf(key), "refused_approver_unavailable")).released).toBe(false);
        const b = await reserved(l, key);
        expect((await l.money.release(b, ctxOf(key), "refused_card_number")).released).toBe(true);
        expect((await l.keys.get(key.id))!).toMatchObject({ spentMc: 0, failCount: 1 });
        // An asked reservation is not released: the person may be reading it.
        const c = await reserved(l, key);
        await l.money.awaitApproval(c, { approvalId: "K7Q2M4XZ3E", askSha256: "b".repeat(64), expiresAt: NOW + 600_000 });
        expect((await l.money.release(c, ctxOf(key), "refused_approver_unavailable")).released).toBe(false);
        const audit = await l.records.audit({ orgId: null, keyId: key.id, sinceMs: null, limit: 10 });
        expect(audit.map((e) => [e.outcome, e.httpStatus])).toEqual([
          ["refused_approver_unavailable", 503],
          ["refused_card_number", 400],
        ]);
      }));
  });
}
