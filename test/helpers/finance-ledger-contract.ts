// The finance part of the desk ledger's contract (SPEC 8.16-8.18), through the port alone, run on
// every DeskLedger adapter by the same files as the ledger contract (ledger-contract-*.test.ts):
// the org's budget checked in the one reservation statement whatever the concurrency, refunds
// into the key's and the org's own periods, the first budget counting what its period spent,
// top-ups once per reference, and alerts once per threshold. Each test leaves a sound ledger.
import { describe, expect, test } from "bun:test";
import { checkLedger } from "../../src/core/desk/check.ts";
import { hourOf, periodOf, type Reset } from "../../src/core/desk/period.ts";
import type { CallContext, DeskLedger, OrgRecordMaker, ReserveResult } from "../../src/core/desk/ports.ts";
import { receiptMakerFor } from "../../src/core/desk/receipt-maker.ts";
import { newKeySecret } from "../../src/core/desk/secrets.ts";
import { alertEventProblem } from "../../src/core/finance/alerts.ts";
import { orgChainProblems, signOrgRecord } from "../../src/core/finance/org-records.ts";
import { generateSigningKey, loadSigner, sha256Hex } from "../../src/core/receipt/index.ts";
import { type LedgerUnderTest, onLedger } from "./ledger-contract.ts";

const NOON = Date.parse("2026-11-30T12:00:00Z");
const SIGNER = loadSigner(generateSigningKey().privatePem);
const make = receiptMakerFor(SIGNER);
const recordMaker: OrgRecordMaker = (fields) => {
  const envelope = signOrgRecord(SIGNER, fields);
  return { record: envelope.record, sha256: sha256Hex(Buffer.from(envelope.payload, "base64url")), envelope: JSON.stringify(envelope) };
};

let serial = 0;

type Finance = {
  ledger: DeskLedger;
  org(): Promise<string>;
  key(orgId: string, o: { budgetMc: number; reset?: Reset; now?: number; alertThresholds?: number[] }): Promise<string>;
  reserve(keyId: string, priceMc: number, now?: number): Promise<ReserveResult>;
  settle(reservationId: number, outcome: "charged" | "refunded_upstream_error", now?: number): ReturnType<DeskLedger["money"]["settle"]>;
  setBudget(orgId: string, budgetMc: number | null, reset: Reset | null, now?: number): ReturnType<DeskLedger["finance"]["setBudget"]>;
  release(reservationId: number, keyId: string): ReturnType<DeskLedger["money"]["release"]>;
};

async function finance(ledger: DeskLedger): Promise<Finance> {
  await ledger.records.addSigningKey(SIGNER.kid, SIGNER.publicJwk(), NOON);
  const ctx = async (keyId: string, priceMc: number, now: number): Promise<CallContext> => {
    const key = (await ledger.keys.get(keyId))!;
    return { key, tool: "up__echo", priceMc, upstreamCostMc: 100, paramsSha256: "a".repeat(64), now, hour: hourOf(now), period: periodOf(key.reset, now) };
  };
  return {
    ledger,
    async org() {
      const id = `org_f${++serial}`;
      await ledger.orgs.create({ id, name: id, createdAt: NOON });
      return id;
    },
    async key(orgId, o) {
      const id = `key_f${++serial}`;
      const secret = newKeySecret();
      const reset = o.reset ?? "none";
      const now = o.now ?? NOON;
      await ledger.keys.create({
        id,
        orgId,
        name: id,
        lookup: secret.lookup,
        secretSha256: secret.hash,
        budgetMc: o.budgetMc,
        reset,
        period: periodOf(reset, now),
        allow: ["up__echo"],
        prices: {},
        expiresAt: null,
        now,
        ...(o.alertThresholds === undefined ? {} : { alertThresholds: o.alertThresholds }),
      });
      return id;
    },
    async reserve(keyId, priceMc, now = NOON) {
      return ledger.money.reserve(await ctx(keyId, priceMc, now), make);
    },
    settle(reservationId, outcome, now = NOON) {
      return ledger.money.settle({ reservationId, outcome, resultSha256: outcome === "charged" ? "b".repeat(64) : null, now }, make);
    },
    setBudget(orgId, budgetMc, reset, now = NOON) {
      return ledger.finance.setBudget({ orgId, budgetMc, reset, now }, recordMaker);
    },
    async release(reservationId, keyId) {
      return ledger.money.release(reservationId, await ctx(keyId, 0, NOON), "refused_approver_unavailable");
    },
  };
}

const reservedId = (r: ReserveResult) => {
  if (r.kind !== "reserved") throw new Error(`expected a reservation, got ${r.kind}`);
  return r.reservationId;
};

/** Runs one SQL statement on the adapter's own database (the same text on both): how the check tests damage a ledger. */
export type RawSql = (ledger: DeskLedger, statement: string) => Promise<void>;

export function financeLedgerContract(adapter: string, open: () => Promise<LedgerUnderTest>, raw: RawSql): void {
  const withFinance = (name: string, body: (f: Finance) => Promise<void>, timeoutMs = 30_000) =>
    test(name, () => onLedger(open, async (ledger) => body(await finance(ledger))), timeoutMs);

  describe(`finance ledger contract (${adapter}): the org budget in the reservation`, () => {
    withFinance(
      "three keys of one org, 300 concurrent calls, an org budget for 50: exactly 50 charged, each key's own budget holding",
      async (f) => {
        const orgId = await f.org();
        const keys = [await f.key(orgId, { budgetMc: 30_000 }), await f.key(orgId, { budgetMc: 30_000 }), await f.key(orgId, { budgetMc: 15_000 })];
        expect((await f.setBudget(orgId, 50_999, "monthly")).kind).toBe("set");
        const outcomes = await Promise.all(
          Array.from({ length: 300 }, async (_, i) => {
            const r = await f.reserve(keys[i % 3]!, 1000);
            if (r.kind === "reserved") expect((await f.settle(r.reservationId, "charged")).kind).toBe("settled");
            return r;
          }),
        );
        const reserved = outcomes.filter((r) => r.kind === "reserved");
        expect(reserved).toHaveLength(50);
        // The rest are refused: for want of budget, or (each refusal counting as a failure) by the hour's failure limit.
        const refused = outcomes.filter((r) => r.kind === "no_room");
        expect(refused.length + outcomes.filter((r) => r.kind === "rate_limited").length).toBe(250);
        // The remaining room a refusal reports is the lesser one; nobody is told of room beyond the org's.
        for (const r of refused) expect(r.remainingMc).toBeLessThan(1000);
        const spent = await Promise.all(keys.map(async (k) => (await f.ledger.keys.get(k))!.spentMc));
        expect(spent.reduce((a, b) => a + b, 0)).toBe(50_000);
        expect(spent[2]).toBeLessThanOrEqual(15_000);
        expect(await f.ledger.finance.budget(orgId)).toEqual({ budgetMc: 50_999, reset: "monthly", period: "2026-11", spentMc: 50_000 });
        // A refusal names whose budget was short: the key's own once it is spent, else the org's.
        const shorts = new Set(refused.map((r) => (r.kind === "no_room" ? r.short : "")));
        expect(shorts.has("org")).toBe(true);
        expect(await f.ledger.check.money()).toEqual([]);
      },
      60_000,
    );

    withFinance("a 402 names the key's budget when the key has no room, the org's when only the org has none", async (f) => {
      const orgId = await f.org();
      const small = await f.key(orgId, { budgetMc: 1_000 });
      const big = await f.key(orgId, { budgetMc: 100_000 });
      expect((await f.setBudget(orgId, 3_000, "none")).kind).toBe("set");
      await f.settle(reservedId(await f.reserve(small, 1000)), "charged");
      const keyShort = await f.reserve(small, 1000);
      expect(keyShort).toMatchObject({ kind: "no_room", short: "key", remainingMc: 0 });
      await f.settle(reservedId(await f.reserve(big, 2000)), "charged");
      const orgShort = await f.reserve(big, 1);
      expect(orgShort).toMatchObject({ kind: "no_room", short: "org", remainingMc: 0 });
    });

    withFinance("an org's first budget counts what its period already spent, reservations in flight included, and their refunds go back", async (f) => {
      const orgId = await f.org();
      const key = await f.key(orgId, { budgetMc: 100_000 });
      await f.settle(reservedId(await f.reserve(key, 2000)), "charged");
      const open = reservedId(await f.reserve(key, 3000));
      expect(await f.setBudget(orgId, 4_999, "monthly")).toEqual({ kind: "over_budget" });
      expect(await f.ledger.finance.budget(orgId)).toBeNull();
      const set = await f.setBudget(orgId, 10_000, "monthly");
      expect(set).toMatchObject({ kind: "set", budget: { budgetMc: 10_000, spentMc: 5_000, period: "2026-11" } });
      await f.settle(open, "refunded_upstream_error");
      expect((await f.ledger.finance.budget(orgId))!.spentMc).toBe(2_000);
      expect(await f.setBudget(orgId, 1_999, null)).toEqual({ kind: "over_budget" });
      expect(await f.setBudget(orgId, 2_000, "daily")).toEqual({ kind: "reset_fixed" });
      expect((await f.setBudget(orgId, 2_000, null)).kind).toBe("set");
      expect(await f.reserve(key, 1)).toMatchObject({ kind: "no_room", short: "org" });
    });

    withFinance("a refund across midnight goes back to the key's and the org's old periods, never into the new ones", async (f) => {
      const before = Date.parse("2026-11-30T23:59:59Z");
      const after = Date.parse("2026-12-01T00:00:01Z");
      const orgId = await f.org();
      const key = await f.key(orgId, { budgetMc: 5_000, reset: "daily", now: before });
      expect((await f.setBudget(orgId, 4_000, "daily", before)).kind).toBe("set");
      const old = reservedId(await f.reserve(key, 3000, before));
      const fresh = reservedId(await f.reserve(key, 3000, after));
      expect((await f.settle(old, "refunded_upstream_error", after)).kind).toBe("settled");
      // The new periods keep the new reservation's spend; the refund left them alone.
      expect((await f.ledger.keys.get(key))!).toMatchObject({ period: "2026-12-01", spentMc: 3_000 });
      expect(await f.ledger.finance.budget(orgId)).toMatchObject({ period: "2026-12-01", spentMc: 3_000 });
      expect(await f.reserve(key, 1001, after)).toMatchObject({ kind: "no_room", short: "org" });
      await f.settle(fresh, "charged", after);
      expect(await f.ledger.check.money()).toEqual([]);
    });

    withFinance("a reservation released before its call gives its price back to the key and to the org", async (f) => {
      const orgId = await f.org();
      const key = await f.key(orgId, { budgetMc: 10_000 });
      expect((await f.setBudget(orgId, 3_000, "monthly")).kind).toBe("set");
      const id = reservedId(await f.reserve(key, 2_500));
      expect(await f.release(id, key)).toEqual({ released: true, remainingMc: 3_000 });
      expect((await f.ledger.finance.budget(orgId))!.spentMc).toBe(0);
      expect((await f.ledger.keys.get(key))!.spentMc).toBe(0);
      expect((await f.reserve(key, 3_000)).kind).toBe("reserved");
    });

    withFinance("a clock stepping back behind the org's period refuses, and reopens nothing", async (f) => {
      const orgId = await f.org();
      const key = await f.key(orgId, { budgetMc: 10_000 });
      expect((await f.setBudget(orgId, 10_000, "daily")).kind).toBe("set");
      await f.settle(reservedId(await f.reserve(key, 1000)), "charged");
      expect(await f.reserve(key, 1000, NOON - 86_400_000)).toMatchObject({ kind: "no_room", short: "org" });
      expect((await f.ledger.finance.budget(orgId))!.spentMc).toBe(1_000);
    });
  });

  describe(`finance ledger contract (${adapter}): desk check`, () => {
    test("an org's spend, its period's spend and its counted charges that disagree with its reservations are each reported", async () => {
      const opened = await open();
      try {
        const f = await finance(opened.ledger);
        const orgId = await f.org();
        const key = await f.key(orgId, { budgetMc: 10_000 });
        expect((await f.setBudget(orgId, 10_000, "none")).kind).toBe("set");
        await f.settle(reservedId(await f.reserve(key, 1000)), "charged");
        reservedId(await f.reserve(key, 500));
        expect(await f.ledger.check.money()).toEqual([]);
        await raw(f.ledger, `UPDATE org_budgets SET spent_mc = spent_mc + 1 WHERE org_id = '${orgId}'`);
        expect(await f.ledger.check.money()).toEqual([`org ${orgId}: spent 1501 mc on its budget, 1500 mc in its period`]);
        await raw(f.ledger, `UPDATE org_spend SET spent_mc = spent_mc + 1, charged_mc = charged_mc + 2 WHERE org_id = '${orgId}'`);
        expect(await f.ledger.check.money()).toEqual([
          `org ${orgId} period none: 1002 mc counted as charged, but charges 1000`,
          `org ${orgId} period none: spent 1501 mc, but charges and open reservations 1500`,
        ]);
        await raw(f.ledger, `UPDATE spend SET charged_mc = charged_mc + 3 WHERE key_id = '${key}'`);
        expect(await f.ledger.check.money()).toContain(`key ${key} period none: 1003 mc counted as charged, but charges 1000`);
      } finally {
        await opened.close();
      }
    });
  });

  describe(`finance ledger contract (${adapter}): settled reservations pruned`, () => {
    test("pruned in bounded batches, open ones kept; desk check stays exact and still names a damaged summary; a first budget still counts their charges", async () => {
      const opened = await open();
      try {
        const f = await finance(opened.ledger);
        const orgId = await f.org();
        const key = await f.key(orgId, { budgetMc: 100_000 });
        for (let i = 0; i < 3; i++) await f.settle(reservedId(await f.reserve(key, 1000)), "charged");
        await f.settle(reservedId(await f.reserve(key, 700)), "refunded_upstream_error");
        const open = reservedId(await f.reserve(key, 500));
        // Only what was made before the time given goes, at most the limit each time.
        expect(await f.ledger.money.pruneSettled(NOON, 10)).toBe(0);
        expect(await f.ledger.money.pruneSettled(NOON + 1, 3)).toBe(3);
        expect(await f.ledger.money.pruneSettled(NOON + 1, 3)).toBe(1);
        expect(await f.ledger.money.pruneSettled(NOON + 1, 3)).toBe(0);
        expect(await f.ledger.money.openReservations(Number.POSITIVE_INFINITY)).toEqual([open]);
        expect(await f.ledger.check.money()).toEqual([]);
        // The org's first budget counts the pruned charges of its period and the open reservation.
        expect((await f.setBudget(orgId, 10_000, "none")).kind).toBe("set");
        expect((await f.ledger.finance.budget(orgId))!.spentMc).toBe(3500);
        await f.settle(open, "charged");
        // The newest reservation stays, so its id is never given again: a late settlement of a pruned one cannot find another call's.
        expect(await f.ledger.money.pruneSettled(NOON + 1, 10)).toBe(0);
        const next = reservedId(await f.reserve(key, 100));
        expect(next).toBeGreaterThan(open);
        await f.settle(next, "refunded_upstream_error");
        expect(await f.ledger.money.pruneSettled(NOON + 1, 10)).toBe(1);
        expect((await checkLedger(f.ledger)).problems).toEqual([]);
        // The summary is what the check counts pruned reservations by: damage to it is named.
        await raw(f.ledger, `UPDATE settled_pruned SET settled = settled + 1 WHERE org_id = '${orgId}'`);
        expect(await f.ledger.check.money()).toEqual(["7 settled reservations but 6 receipts of settled calls"]);
        await raw(f.ledger, `UPDATE settled_pruned SET settled = settled - 1, charged_mc = charged_mc + 1 WHERE org_id = '${orgId}'`);
        expect(await f.ledger.check.money()).toEqual([
          `org ${orgId} period none: 3500 mc counted as charged, but charges 3501`,
          `org ${orgId} period none: spent 3500 mc, but charges and open reservations 3501`,
        ]);
        await raw(f.ledger, `UPDATE settled_pruned SET charged_mc = charged_mc - 1 WHERE org_id = '${orgId}'`);
        expect(await f.ledger.check.money()).toEqual([]);
      } finally {
        await opened.close();
      }
    });
  });

  describe(`finance ledger contract (${adapter}): top-ups and records`, () => {
    withFinance("idempotent by reference, concurrent or not: the same amount counts once, another amount conflicts; the records chain", async (f) => {
      const orgId = await f.org();
      expect(await f.ledger.finance.topUp({ orgId, amountMc: 1_000, reference: "pi_0", now: NOON }, recordMaker)).toEqual({ kind: "unlimited" });
      expect(await f.ledger.finance.topUp({ orgId: "org_none", amountMc: 1_000, reference: "pi_0", now: NOON }, recordMaker)).toEqual({
        kind: "missing",
      });
      expect((await f.setBudget(orgId, 5_000, "monthly")).kind).toBe("set");
      const same = await Promise.all(
        Array.from({ length: 8 }, () => f.ledger.finance.topUp({ orgId, amountMc: 2_500, reference: "pi_1", now: NOON + 1 }, recordMaker)),
      );
      expect(same.filter((r) => r.kind === "added")).toHaveLength(1);
      expect(same.filter((r) => r.kind === "existing")).toHaveLength(7);
      expect(await f.ledger.finance.topUp({ orgId, amountMc: 999, reference: "pi_1", now: NOON + 2 }, recordMaker)).toEqual({ kind: "conflict" });
      expect((await f.ledger.finance.budget(orgId))!.budgetMc).toBe(7_500);
      const max = await f.ledger.finance.topUp({ orgId, amountMc: Number.MAX_SAFE_INTEGER, reference: "pi_2", now: NOON + 3 }, recordMaker);
      expect(max).toEqual({ kind: "too_large" });
      const records = await f.ledger.finance.records(orgId);
      expect(records.map((r) => [r.record.seq, r.record.type, r.record.budget_mc])).toEqual([
        [1, "budget_set", 5_000],
        [2, "topup", 7_500],
      ]);
      expect(
        orgChainProblems(
          records.map((r) => ({ record: r.record, payloadSha256: r.sha256 })),
          orgId,
        ),
      ).toEqual([]);
    });

    withFinance("a statement's data: every record, and the receipts issued before the moment it took", async (f) => {
      const orgId = await f.org();
      const key = await f.key(orgId, { budgetMc: 10_000 });
      expect((await f.setBudget(orgId, 10_000, "none")).kind).toBe("set");
      await f.settle(reservedId(await f.reserve(key, 1000)), "charged", NOON + 10);
      const data = await f.ledger.finance.statementData(orgId, () => NOON + 20);
      expect(data.issuedAt).toBe(NOON + 20);
      expect(data.records).toHaveLength(1);
      expect(data.receipts.map((r) => r.receipt.outcome)).toEqual(["charged"]);
      const earlier = await f.ledger.finance.statementData(orgId, () => NOON + 10);
      expect(earlier.receipts).toEqual([]);
    });
  });

  describe(`finance ledger contract (${adapter}): alerts`, () => {
    withFinance(
      "50 concurrent charges across five keys: each threshold of each key and of the org alerts exactly once",
      async (f) => {
        const orgId = await f.org();
        const keys = await Promise.all(Array.from({ length: 5 }, () => f.key(orgId, { budgetMc: 10_000 })));
        expect((await f.setBudget(orgId, 50_000, "monthly")).kind).toBe("set");
        const written = await Promise.all(
          Array.from({ length: 50 }, async (_, i) => {
            const s = await f.settle(reservedId(await f.reserve(keys[i % 5]!, 1000)), "charged");
            return s.kind === "settled" ? s.alerts : 0;
          }),
        );
        const alerts = await f.ledger.alerts.list({ orgId, limit: 100 });
        expect(written.reduce((a, b) => a + b, 0)).toBe(alerts.length);
        const seen = alerts.map((a) => `${a.scope} ${a.subjectId} ${a.thresholdPct}`).sort();
        expect(seen).toEqual([...keys.flatMap((k) => [`key ${k} 100`, `key ${k} 80`]), `org ${orgId} 100`, `org ${orgId} 80`].sort());
        for (const a of alerts) expect(alertEventProblem(JSON.parse(a.body))).toBeNull();
        const org80 = JSON.parse(alerts.find((a) => a.scope === "org" && a.thresholdPct === 80)!.body);
        expect(org80.data).toMatchObject({ period: "2026-11", threshold_mc: 40_000, spent_mc: 40_000, budget_mc: 50_000, cause: "charge" });
        // Refusals once every budget is spent reach no mark again: nothing new is written.
        for (const k of keys) expect(await f.reserve(k, 1000)).toMatchObject({ kind: "no_room", alerts: 0 });
        expect(await f.ledger.alerts.list({ orgId, limit: 100 })).toHaveLength(12);
      },
      60_000,
    );

    withFinance("thresholds set per key and per org; a refusal for want of budget reaches the marks a charge could not", async (f) => {
      const orgId = await f.org();
      expect(await f.ledger.finance.thresholds(orgId)).toEqual([80, 100]);
      expect(await f.ledger.finance.setThresholds(orgId, [50])).toBe(true);
      expect(await f.ledger.finance.setThresholds("org_none", [50])).toBe(false);
      expect(await f.ledger.finance.thresholds(orgId)).toEqual([50]);
      const key = await f.key(orgId, { budgetMc: 1_500, alertThresholds: [90] });
      expect((await f.ledger.keys.get(key))!.alertThresholds).toEqual([90]);
      expect((await f.ledger.keys.patch(key, { alertThresholds: [] }, NOON)).alertThresholds).toEqual([]);
      expect((await f.ledger.keys.patch(key, { alertThresholds: [60, 100] }, NOON)).alertThresholds).toEqual([60, 100]);
      expect((await f.setBudget(orgId, 100_000, "none")).kind).toBe("set");
      const charge = await f.settle(reservedId(await f.reserve(key, 1000)), "charged");
      expect(charge).toMatchObject({ kind: "settled", alerts: 1 });
      // 1,000 of 1,500 spent: a price of 1,000 no longer fits, and the refusal reaches 100 %.
      const refusal = await f.reserve(key, 1000);
      expect(refusal).toMatchObject({ kind: "no_room", short: "key", alerts: 1 });
      const alerts = await f.ledger.alerts.list({ orgId, limit: 10 });
      expect(alerts.map((a) => [a.scope, a.thresholdPct, JSON.parse(a.body).data.cause])).toEqual([
        ["key", 100, "refusal"],
        ["key", 60, "charge"],
      ]);
      expect(await f.ledger.alerts.list({ orgId: "org_none", limit: 10 })).toEqual([]);
    });
  });
}
