// The desk ledger's contract: what every DeskLedger adapter (core/desk/ports.ts) must do, tested
// through the port alone. One suite, run against each adapter by a file of its own
// (test/integration/ledger-contract-*.test.ts) that only says how to open a fresh ledger.
import { describe, expect, test } from "bun:test";
import { checkLedger } from "../../src/core/desk/check.ts";
import { type PlainOutcome, type ReceiptOutcome, statusOf } from "../../src/core/desk/outcomes.ts";
import { hourOf, periodOf, type Reset } from "../../src/core/desk/period.ts";
import { type CallContext, type DeskLedger, LedgerConflict, type ReserveResult, type StoredReceipt } from "../../src/core/desk/ports.ts";
import { receiptMakerFor } from "../../src/core/desk/receipt-maker.ts";
import type { AuditEntry, AuditFilter, NewKey, ReceiptRecord } from "../../src/core/desk/records.ts";
import { newKeySecret } from "../../src/core/desk/secrets.ts";
import { generateSigningKey, loadSigner, openEnvelope, ReceiptKeys } from "../../src/core/receipt/index.ts";

export type LedgerUnderTest = {
  ledger: DeskLedger;
  close(): Promise<void> | void;
  /** The rows the adapter's audit table holds (read around the port, to see what a call wrote). */
  auditRows?: () => Promise<number>;
};

/**
 * Opens a ledger, runs `body` on it, and closes it. With `sound` (the default), whatever the test
 * did through the port, the ledger it leaves must pass `desk check`. Every contract suite runs its
 * tests through this.
 */
export async function onLedger(
  open: () => Promise<LedgerUnderTest> | LedgerUnderTest,
  body: (ledger: DeskLedger, opened: LedgerUnderTest) => Promise<void>,
  { sound = true } = {},
): Promise<void> {
  const opened = await open();
  try {
    await body(opened.ledger, opened);
    if (sound) expect((await checkLedger(opened.ledger)).problems).toEqual([]);
  } finally {
    await opened.close();
  }
}

const T0 = Date.parse("2026-11-30T10:00:00Z");
const DAY = 86_400_000;
const SIGNER = loadSigner(generateSigningKey().privatePem);
const make = receiptMakerFor(SIGNER);

type Fixture = {
  ledger: DeskLedger;
  addKey(o?: { budgetMc?: number; reset?: Reset; orgId?: string; now?: number }): Promise<{ id: string; secret: ReturnType<typeof newKeySecret> }>;
  ctx(keyId: string, priceMc: number, now?: number, tool?: string): Promise<CallContext>;
  reserve(keyId: string, priceMc: number, now?: number): Promise<ReserveResult>;
  reserved(keyId: string, priceMc: number, now?: number): Promise<number>;
  settle(reservationId: number, outcome: "charged" | "refunded_upstream_error" | "refunded_abandoned", now?: number): ReturnType<DeskLedger["money"]["settle"]>;
};

let keys = 0;

async function fixture(ledger: DeskLedger): Promise<Fixture> {
  await ledger.records.addSigningKey(SIGNER.kid, SIGNER.publicJwk(), T0);
  const orgs = new Set<string>();
  const f: Fixture = {
    ledger,
    async addKey(o = {}) {
      const orgId = o.orgId ?? "org_a";
      if (!orgs.has(orgId)) {
        await ledger.orgs.create({ id: orgId, name: orgId, createdAt: T0 });
        orgs.add(orgId);
      }
      keys += 1;
      const id = `key_${keys}`;
      const secret = newKeySecret();
      const reset = o.reset ?? "none";
      const now = o.now ?? T0;
      const k: NewKey = {
        id,
        orgId,
        name: id,
        lookup: secret.lookup,
        secretSha256: secret.hash,
        budgetMc: o.budgetMc ?? 1_000,
        reset,
        period: periodOf(reset, now),
        allow: ["up__echo"],
        prices: {},
        expiresAt: null,
        now,
      };
      await ledger.keys.create(k);
      return { id, secret };
    },
    async ctx(keyId, priceMc, now = T0, tool = "up__echo") {
      const key = (await ledger.keys.get(keyId))!;
      return { key, tool, priceMc, upstreamCostMc: 10, paramsSha256: "a".repeat(64), now, hour: hourOf(now), period: periodOf(key.reset, now) };
    },
    async reserve(keyId, priceMc, now = T0) {
      return ledger.money.reserve(await f.ctx(keyId, priceMc, now), make);
    },
    async reserved(keyId, priceMc, now = T0) {
      const r = await f.reserve(keyId, priceMc, now);
      if (r.kind !== "reserved") throw new Error(`expected a reservation, got ${r.kind}`);
      return r.reservationId;
    },
    settle(reservationId, outcome, now = T0) {
      return ledger.money.settle({ reservationId, outcome, resultSha256: outcome === "charged" ? "b".repeat(64) : null, now }, make);
    },
  };
  return f;
}

const conflictOf = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e) => (e instanceof LedgerConflict ? e.code : e),
  );

/** The receipt a stored envelope carries, its signature checked. */
function signed(r: StoredReceipt | { envelope: string }) {
  const opened = openEnvelope(JSON.parse(r.envelope), ReceiptKeys.fromJwks({ keys: [SIGNER.publicJwk()] }));
  expect(opened.checks.filter((c) => !c.ok)).toEqual([]);
  return opened.signed!;
}

/** The export's bytes, as GET /admin/receipts sends them, joined. */
export async function exportText(ledger: DeskLedger, filter: { orgId: string | null; sinceMs: number | null }): Promise<string> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of ledger.records.exportChunks(filter)) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * The export's bytes: each receipt's envelope and a newline, in the pages' order, by org and time,
 * ending with what was stored when it began. Part of ledgerContract, and run alone on a
 * ledger that exports another way (SQLite in memory, on the calling thread).
 */
export function exportContract(adapter: string, open: () => Promise<LedgerUnderTest> | LedgerUnderTest): void {
  test(
    `ledger contract (${adapter}): the export's bytes are the envelopes in issue order, of what was stored when it began`,
    () =>
      onLedger(open, async (ledger) => {
        const f = await fixture(ledger);
        const a = await f.addKey({ orgId: "org_a" });
        const b = await f.addKey({ orgId: "org_b" });
        // enough receipts for several chunks of the SQLite thread's 64 KB
        for (let i = 0; i < 150; i++) await f.settle(await f.reserved(i % 3 === 0 ? b.id : a.id, 1, T0 + i), "charged", T0 + i);
        const lines = async (filter: { orgId: string | null; sinceMs: number | null }) =>
          (await receiptsOf(ledger, filter)).map((r) => `${r.envelope}\n`).join("");
        const chunks: Uint8Array[] = [];
        for await (const chunk of ledger.records.exportChunks({ orgId: null, sinceMs: null })) {
          chunks.push(chunk);
          // stored while the export runs: after its start, so not in it
          if (chunks.length === 1) await f.settle(await f.reserved(a.id, 1, T0 + 999), "charged", T0 + 999);
        }
        expect(chunks.length).toBeGreaterThan(1);
        for (const chunk of chunks) expect(chunk.at(-1)).toBe(10);
        const text = Buffer.concat(chunks).toString("utf8");
        expect(text.split("\n")).toHaveLength(151);
        expect(`${text}${(await receiptsOf(ledger, { orgId: null, sinceMs: T0 + 999 }))[0]!.envelope}\n`).toBe(await lines({ orgId: null, sinceMs: null }));
        expect(await exportText(ledger, { orgId: "org_b", sinceMs: null })).toBe(await lines({ orgId: "org_b", sinceMs: null }));
        expect((await exportText(ledger, { orgId: "org_b", sinceMs: null })).split("\n")).toHaveLength(51);
        expect(await exportText(ledger, { orgId: "org_a", sinceMs: T0 + 140 })).toBe(await lines({ orgId: "org_a", sinceMs: T0 + 140 }));
        expect(await exportText(ledger, { orgId: null, sinceMs: T0 + 2000 })).toBe("");
        expect(await exportText(ledger, { orgId: "org_none", sinceMs: null })).toBe("");
      }),
    30_000,
  );
}

/** What a mix of calls recorded: one entry per call, in the order written, with the values of the call itself (the audit row a call with a receipt would have had). */
export type AuditMix = { recorded: AuditEntry[]; keyIds: string[]; tie: number | null };

/**
 * Writes a mix of calls on `ledger` (charged, refunded, abandoned, refused with and without a
 * receipt, released) on keys of two orgs, each at its own millisecond, and with `tie` a refusal
 * and then a charge at one millisecond; `after` sees each call's entry once the call is written.
 */
export async function writeAuditMix(
  ledger: DeskLedger,
  { tie = true, after = async () => {} }: { tie?: boolean; after?: (entry: AuditEntry) => Promise<void> } = {},
): Promise<AuditMix> {
  const f = await fixture(ledger);
  const a = await f.addKey({ orgId: "org_a", budgetMc: 1_000 });
  const b = await f.addKey({ orgId: "org_b", budgetMc: 300 });
  const c = await f.addKey({ orgId: "org_a", budgetMc: 1_000 });
  const recorded: AuditEntry[] = [];
  // Each call's entry from the call itself, beside what the ledger derives from its receipt.
  const note = async (ctx: CallContext, outcome: ReceiptOutcome | PlainOutcome, receiptId: string | null) => {
    const entry: AuditEntry = {
      at: ctx.now,
      orgId: ctx.key.orgId,
      keyId: ctx.key.id,
      tool: ctx.tool,
      outcome,
      httpStatus: statusOf(outcome),
      priceMc: ctx.priceMc,
      upstreamCostMc: ctx.upstreamCostMc,
      marginMc: outcome === "charged" ? ctx.priceMc - ctx.upstreamCostMc : 0,
      receiptId,
    };
    recorded.push(entry);
    await after(entry);
  };
  let t = T0;
  const later = (ms: number) => {
    t += ms;
    return t;
  };
  const settled = async (keyId: string, priceMc: number, outcome: "charged" | "refunded_upstream_error" | "refunded_abandoned", at?: number) => {
    const ctx = await f.ctx(keyId, priceMc, at ?? later(7));
    const r = await ledger.money.reserve(ctx, make);
    if (r.kind !== "reserved") throw new Error(`expected a reservation, got ${r.kind}`);
    const now = at ?? later(3);
    const s = await f.settle(r.reservationId, outcome, now);
    if (s.kind !== "settled") throw new Error(`expected a settlement, got ${s.kind}`);
    await note({ ...ctx, now }, outcome, s.receipt.id);
  };
  const plain = async (keyId: string, priceMc: number, outcome: PlainOutcome, tool = "up__echo") => {
    const ctx = await f.ctx(keyId, priceMc, later(7), tool);
    await ledger.money.recordPlainRefusal(ctx, outcome);
    await note(ctx, outcome, null);
  };

  await settled(a.id, 100, "charged");
  await settled(b.id, 100, "refunded_upstream_error");
  const notAllowed = await f.ctx(a.id, 100, later(7), "up__other");
  await note(notAllowed, "refused_not_allowed", (await ledger.money.refuseNotAllowed(notAllowed, make)).receipt.id);
  await plain(c.id, 0, "refused_tool_unknown", "up__nope");
  await settled(b.id, 200, "charged");
  const noRoom = await f.ctx(b.id, 200, later(7));
  const refused = await ledger.money.reserve(noRoom, make);
  if (refused.kind !== "no_room") throw new Error(`expected no room, got ${refused.kind}`);
  await note(noRoom, "refused_budget", refused.receipt.id);
  const released = await f.ctx(a.id, 100, later(7));
  const held = await ledger.money.reserve(released, make);
  if (held.kind !== "reserved") throw new Error(`expected a reservation, got ${held.kind}`);
  expect((await ledger.money.release(held.reservationId, released, "refused_approver_unavailable")).released).toBe(true);
  await note(released, "refused_approver_unavailable", null);
  await settled(c.id, 100, "refunded_abandoned");
  await plain(a.id, 100, "refused_rate_limited");
  await settled(c.id, 50, "charged");
  // One millisecond, a refusal written before a charge.
  await plain(a.id, 30, "refused_args_invalid");
  if (tie) await settled(a.id, 30, "charged", t);
  await settled(b.id, 0, "charged");
  return { recorded, keyIds: [a.id, b.id, c.id], tie: tie ? recorded.at(-3)!.at : null };
}

/** Every filter the audit tests ask: each org (and one with nothing), each of two keys, two times, four limits. */
export function auditFilters(mix: AuditMix): AuditFilter[] {
  const [a, b] = mix.keyIds;
  const times = [T0 + 30, mix.tie ?? mix.recorded.at(-2)!.at];
  const filters: AuditFilter[] = [];
  for (const orgId of [null, "org_a", "org_b", "org_none"]) {
    for (const keyId of [null, a!, b!]) {
      for (const sinceMs of [null, ...times]) for (const limit of [1, 2, 5, 100]) filters.push({ orgId, keyId, sinceMs, limit });
    }
  }
  return filters;
}

/**
 * The audit log of a mix of calls is the list the write path recorded, at every filter and
 * limit, oldest first, and at one millisecond the receipt's entry first. A receipted call adds
 * no audit row; a call without a receipt adds one. Part of ledgerContract, and run alone on
 * SQLite in memory.
 */
export function auditContract(adapter: string, open: () => Promise<LedgerUnderTest> | LedgerUnderTest): void {
  test(
    `ledger contract (${adapter}): the audit log answers each call as it was recorded; a receipted call adds no audit row`,
    () =>
      onLedger(open, async (ledger, opened) => {
        const rows = async () => (opened.auditRows === undefined ? null : await opened.auditRows());
        let before = await rows();
        const mix = await writeAuditMix(ledger, {
          after: async (entry) => {
            const now = await rows();
            expect({ entry, added: before === null || now === null ? null : now - before }).toEqual({
              entry,
              added: opened.auditRows === undefined ? null : entry.receiptId === null ? 1 : 0,
            });
            before = now;
          },
        });
        const { recorded, tie } = mix;
        const expected = [...recorded].sort((x, y) => x.at - y.at || Number(x.receiptId === null) - Number(y.receiptId === null));
        expect(recorded.filter((e) => e.at === tie).map((e) => e.outcome)).toEqual(["refused_args_invalid", "charged"]);
        expect(expected.filter((e) => e.at === tie).map((e) => e.outcome)).toEqual(["charged", "refused_args_invalid"]);
        expect(expected.map((e) => e.at)).toEqual(recorded.map((e) => e.at));
        if (opened.auditRows !== undefined) expect(await opened.auditRows()).toBe(recorded.filter((e) => e.receiptId === null).length);
        expect(await ledger.records.audit({ orgId: null, keyId: null, sinceMs: null, limit: 1_000 })).toEqual(expected);
        for (const filter of auditFilters(mix)) {
          const { orgId, keyId, sinceMs, limit } = filter;
          const want = expected
            .filter((e) => (orgId === null || e.orgId === orgId) && (keyId === null || e.keyId === keyId) && (sinceMs === null || e.at >= sinceMs))
            .slice(0, limit);
          expect({ filter, answer: await ledger.records.audit(filter) }).toEqual({ filter, answer: want });
        }
      }),
    30_000,
  );
}

export function ledgerContract(adapter: string, open: () => Promise<LedgerUnderTest>): void {
  const withLedger = (name: string, body: (f: Fixture) => Promise<void>, timeoutMs = 20_000) =>
    test(name, () => onLedger(open, async (ledger) => body(await fixture(ledger))), timeoutMs);

  exportContract(adapter, open);
  auditContract(adapter, open);

  describe(`ledger contract (${adapter}): orgs and keys`, () => {
    withLedger("an org and a key read back as created; a key is found by its secret only", async (f) => {
      const { id, secret } = await f.addKey({ budgetMc: 5_000 });
      expect(await f.ledger.orgs.get("org_a")).toEqual({ id: "org_a", name: "org_a", createdAt: T0 });
      expect(await f.ledger.orgs.get("org_nope")).toBeNull();
      const key = (await f.ledger.keys.get(id))!;
      expect(key).toMatchObject({ id, orgId: "org_a", budgetMc: 5_000, spentMc: 0, reset: "none", period: "none", allow: ["up__echo"], revokedAt: null });
      expect(await f.ledger.keys.find(secret.lookup, secret.hash)).toMatchObject({ id });
      expect(await f.ledger.keys.find(secret.lookup, new Uint8Array(32))).toBeNull();
    });

    withLedger("lists in creation order, by org", async (f) => {
      const a = await f.addKey({ orgId: "org_a" });
      const b = await f.addKey({ orgId: "org_b", now: T0 + 1 });
      const c = await f.addKey({ orgId: "org_a", now: T0 + 2 });
      expect((await f.ledger.keys.list(null)).map((k) => k.id)).toEqual([a.id, b.id, c.id]);
      expect((await f.ledger.keys.list("org_a")).map((k) => k.id)).toEqual([a.id, c.id]);
      expect((await f.ledger.orgs.list()).map((o) => o.id)).toEqual(["org_a", "org_b"]);
    });

    withLedger("a patch changes what it names; a budget below this period's spend is OVER_BUDGET; a missing key is MISSING", async (f) => {
      const { id } = await f.addKey({ budgetMc: 1_000 });
      await f.reserved(id, 600);
      const patched = await f.ledger.keys.patch(id, { name: "renamed", allow: ["a", "b"], prices: { a: 5 }, expiresAt: T0 + DAY }, T0);
      expect(patched).toMatchObject({ name: "renamed", allow: ["a", "b"], prices: { a: 5 }, expiresAt: T0 + DAY, budgetMc: 1_000, spentMc: 600 });
      expect(await conflictOf(f.ledger.keys.patch(id, { budgetMc: 599 }, T0))).toBe("OVER_BUDGET");
      expect((await f.ledger.keys.patch(id, { budgetMc: 600, expiresAt: null }, T0)).budgetMc).toBe(600);
      expect(await conflictOf(f.ledger.keys.patch("key_nope", { name: "x" }, T0))).toBe("MISSING");
      const open = await f.ledger.money.openReservations(Number.POSITIVE_INFINITY);
      for (const r of open) await f.settle(r, "refunded_abandoned");
    });

    withLedger("a daily key's budget may go below yesterday's spend: the patch compares with today's", async (f) => {
      const { id } = await f.addKey({ budgetMc: 1_000, reset: "daily" });
      await f.settle(await f.reserved(id, 900), "charged");
      expect(await conflictOf(f.ledger.keys.patch(id, { budgetMc: 100 }, T0))).toBe("OVER_BUDGET");
      const next = await f.ledger.keys.patch(id, { budgetMc: 100 }, T0 + DAY);
      expect(next).toMatchObject({ budgetMc: 100, spentMc: 0, period: periodOf("daily", T0 + DAY) });
    });

    withLedger("a rotation: the old secret stops matching at once; a revocation is kept with its time", async (f) => {
      const { id, secret } = await f.addKey();
      const fresh = newKeySecret();
      expect(await f.ledger.keys.rotate(id, fresh.lookup, fresh.hash)).toBe(true);
      expect(await f.ledger.keys.find(secret.lookup, secret.hash)).toBeNull();
      expect(await f.ledger.keys.find(fresh.lookup, fresh.hash)).toMatchObject({ id });
      expect(await f.ledger.keys.rotate("key_nope", fresh.lookup, fresh.hash)).toBe(false);
      expect(await f.ledger.keys.revoke(id, T0 + 5)).toBe(true);
      expect(await f.ledger.keys.revoke(id, T0 + 9)).toBe(true);
      expect((await f.ledger.keys.get(id))!.revokedAt).toBe(T0 + 5);
      expect(await f.ledger.keys.revoke("key_nope", T0)).toBe(false);
      expect(await f.reserve(id, 1)).toEqual({ kind: "key_gone" });
    });
  });

  describe(`ledger contract (${adapter}): money`, () => {
    withLedger("reserve, charge: the money stays and the receipt says what was paid", async (f) => {
      const { id } = await f.addKey({ budgetMc: 1_000 });
      const r = await f.reserve(id, 300);
      expect(r).toMatchObject({ kind: "reserved", remainingMc: 700 });
      const s = await f.settle((r as { reservationId: number }).reservationId, "charged");
      expect(s).toMatchObject({ kind: "settled", remainingMc: 700 });
      const receipt = signed((s as { receipt: StoredReceipt }).receipt);
      expect(receipt).toMatchObject({ key_id: id, outcome: "charged", amount_mc: 300, price_mc: 300, remaining_mc: 700, seq: 1, prev_sha256: null });
      expect((await f.ledger.keys.get(id))!.spentMc).toBe(300);
    });

    withLedger("a refund gives the price back; a second settlement changes nothing and says what the first did", async (f) => {
      const { id } = await f.addKey({ budgetMc: 1_000 });
      const reservation = await f.reserved(id, 400);
      const first = await f.settle(reservation, "refunded_upstream_error");
      expect(first).toMatchObject({ kind: "settled", remainingMc: 1_000 });
      const again = await f.settle(reservation, "charged");
      expect(again.kind).toBe("already_settled");
      if (again.kind !== "already_settled") return;
      expect(again.outcome).toBe("refunded_upstream_error");
      expect(again.receipt?.id).toBe((first as { receipt: StoredReceipt }).receipt.id);
      expect(again.remainingMc).toBe(1_000);
      expect((await f.ledger.keys.get(id))!.spentMc).toBe(0);
      expect(await conflictOf(f.settle(987_654, "charged"))).toBe("MISSING");
    });

    withLedger("no room: a refused_budget receipt, nothing reserved", async (f) => {
      const { id } = await f.addKey({ budgetMc: 500 });
      await f.reserved(id, 400);
      const r = await f.reserve(id, 101);
      expect(r).toMatchObject({ kind: "no_room", remainingMc: 100 });
      expect(signed((r as { receipt: StoredReceipt }).receipt)).toMatchObject({ outcome: "refused_budget", amount_mc: 0, http_status: 402 });
      expect(await f.reserve(id, 100)).toMatchObject({ kind: "reserved", remainingMc: 0 });
      for (const open of await f.ledger.money.openReservations(Number.POSITIVE_INFINITY)) await f.settle(open, "charged");
      expect((await f.ledger.keys.get(id))!.spentMc).toBe(500);
    });

    withLedger("40 reservations at once on room for 7: exactly 7, then 13 refusals, then the failure limit", async (f) => {
      const { id } = await f.addKey({ budgetMc: 700 });
      const ctx = await f.ctx(id, 100);
      const results = await Promise.all(Array.from({ length: 40 }, () => f.ledger.money.reserve(ctx, make)));
      const count = (kind: string) => results.filter((r) => r.kind === kind).length;
      expect([count("reserved"), count("no_room"), count("rate_limited")]).toEqual([7, 13, 20]);
      expect((await f.ledger.keys.get(id))!.spentMc).toBe(700);
      for (const r of results) if (r.kind === "reserved") await f.settle(r.reservationId, "charged");
    });

    withLedger("a refund goes back to the period it was reserved from, never into the new day", async (f) => {
      const { id } = await f.addKey({ budgetMc: 1_000, reset: "daily" });
      const yesterday = await f.reserved(id, 600);
      // The next day: the key starts again, and yesterday's call is refunded into yesterday.
      await f.settle(await f.reserved(id, 700, T0 + DAY), "charged", T0 + DAY);
      await f.settle(yesterday, "refunded_upstream_error", T0 + DAY);
      const key = (await f.ledger.keys.get(id))!;
      expect([key.period, key.spentMc]).toEqual([periodOf("daily", T0 + DAY), 700]);
    });

    withLedger("the period never moves back: a clock stepping back finds no room in a spent period", async (f) => {
      const { id } = await f.addKey({ budgetMc: 1_000, reset: "daily" });
      await f.settle(await f.reserved(id, 1_000, T0 + DAY), "charged", T0 + DAY);
      expect((await f.reserve(id, 1, T0)).kind).toBe("no_room");
    });

    withLedger("refusals: 403 is a signed receipt and a failure counted; 404/400 an audit row and a failure; 429 an audit row only", async (f) => {
      const { id } = await f.addKey();
      const refused = await f.ledger.money.refuseNotAllowed(await f.ctx(id, 100, T0, "up__other"), make);
      expect(signed(refused.receipt)).toMatchObject({ outcome: "refused_not_allowed", http_status: 403, seq: 1 });
      await f.ledger.money.recordPlainRefusal(await f.ctx(id, 0, T0, "up__nope"), "refused_tool_unknown");
      await f.ledger.money.recordPlainRefusal(await f.ctx(id, 100), "refused_args_invalid");
      await f.ledger.money.recordPlainRefusal(await f.ctx(id, 100), "refused_rate_limited");
      expect((await f.ledger.keys.get(id))!.failCount).toBe(3);
      const audit = await f.ledger.records.audit({ orgId: null, keyId: id, sinceMs: null, limit: 10 });
      expect(audit.map((a) => [a.outcome, a.httpStatus, a.receiptId === null])).toEqual([
        ["refused_not_allowed", 403, false],
        ["refused_tool_unknown", 404, true],
        ["refused_args_invalid", 400, true],
        ["refused_rate_limited", 429, true],
      ]);
    });

    withLedger("a charge takes back the failure its reservation counted", async (f) => {
      const { id } = await f.addKey();
      await f.settle(await f.reserved(id, 10), "charged");
      await f.settle(await f.reserved(id, 10), "refunded_upstream_error");
      expect((await f.ledger.keys.get(id))!.failCount).toBe(1);
    });

    withLedger("open reservations: those before the time given, gone once settled", async (f) => {
      const { id } = await f.addKey();
      const early = await f.reserved(id, 10, T0);
      const late = await f.reserved(id, 10, T0 + 1_000);
      expect(await f.ledger.money.openReservations(T0 + 1)).toEqual([early]);
      expect(await f.ledger.money.openReservations(Number.POSITIVE_INFINITY)).toEqual([early, late]);
      await f.settle(early, "refunded_abandoned");
      expect(await f.ledger.money.openReservations(Number.POSITIVE_INFINITY)).toEqual([late]);
      await f.settle(late, "charged");
    });

    withLedger("one key's receipts form one chain: seq 1..N, each prev_sha256 the previous receipt's hash", async (f) => {
      const { id } = await f.addKey({ budgetMc: 300 });
      const settles = await Promise.all(Array.from({ length: 3 }, async () => f.settle(await f.reserved(id, 100), "charged")));
      await f.reserve(id, 100);
      await f.ledger.money.refuseNotAllowed(await f.ctx(id, 1, T0, "up__other"), make);
      expect(settles.every((s) => s.kind === "settled")).toBe(true);
      const chain = await f.ledger.records.keyReceipts(id, 0, 100);
      expect(chain.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
      for (const [i, r] of chain.entries()) {
        const s = signed(r);
        expect(s.seq).toBe(i + 1);
        expect(s.prev_sha256).toBe(i === 0 ? null : chain[i - 1]!.sha256);
      }
      expect((await f.ledger.records.keyReceipts(id, 0, 2)).map((r) => r.seq)).toEqual([1, 2]);
    });
  });

  describe(`ledger contract (${adapter}): held results`, () => {
    withLedger("a held result is there until its time; a key keeps its newest few", async (f) => {
      const { id } = await f.addKey();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const s = await f.settle(await f.reserved(id, 1), "charged");
        const rid = (s as { receipt: StoredReceipt }).receipt.id;
        ids.push(rid);
        await f.ledger.money.holdResult({ receiptId: rid, keyId: id, result: { n: i }, heldUntil: T0 + 1_000, now: T0, perKey: 2 });
      }
      expect(await f.ledger.records.heldResult(ids[0]!, T0)).toBeNull();
      expect(await f.ledger.records.heldResult(ids[2]!, T0)).toEqual({ receiptId: ids[2]!, keyId: id, result: { n: 2 }, heldUntil: T0 + 1_000 });
      expect(await f.ledger.records.heldAmong(ids, T0)).toEqual(new Set([ids[1]!, ids[2]!]));
      expect(await f.ledger.records.heldResult(ids[2]!, T0 + 1_000)).toBeNull();
      expect(await f.ledger.records.heldAmong([], T0)).toEqual(new Set());
    });
  });

  describe(`ledger contract (${adapter}): catalog`, () => {
    const up = { name: "up", kind: "mcp" as const, url: "http://127.0.0.1:9/mcp", auth: null, document: null, sealedFields: {}, now: T0 };
    const tool = (name: string, description = "") => ({
      name: `up__${name}`,
      upstreamTool: name,
      description,
      inputSchema: { type: "object" },
      listing: { title: name },
      operation: null,
    });

    withLedger("an upstream with its tools; a taken name is EXISTS; every write moves the stamp", async (f) => {
      const stamps = [await f.ledger.catalog.stamp()];
      await f.ledger.catalog.addUpstream(up, [tool("echo"), tool("sum")]);
      stamps.push(await f.ledger.catalog.stamp());
      expect(await conflictOf(f.ledger.catalog.addUpstream(up, []))).toBe("EXISTS");
      expect(await f.ledger.catalog.upstream("up")).toEqual({
        name: "up",
        kind: "mcp",
        url: up.url,
        sealedHeaders: null,
        headerNames: [],
        auth: null,
        document: null,
        createdAt: T0,
        refreshedAt: T0,
      });
      expect((await f.ledger.catalog.upstreams()).map((u) => u.name)).toEqual(["up"]);
      expect(await f.ledger.catalog.tool("up__echo")).toEqual({ ...tool("echo"), upstream: "up", priceMc: 0, upstreamCostMc: 0, active: true });
      expect(await f.ledger.catalog.setPrice("up__echo", 1_500, 200)).toBe(true);
      stamps.push(await f.ledger.catalog.stamp());
      expect(await f.ledger.catalog.setPrice("up__nope", 1, 1)).toBe(false);
      await f.ledger.catalog.refreshTools("up", [tool("echo", "new text"), tool("third")], T0 + 5);
      stamps.push(await f.ledger.catalog.stamp());
      expect(new Set(stamps).size).toBe(stamps.length);
      const tools = await f.ledger.catalog.tools();
      expect(tools.map((t) => [t.name, t.active, t.priceMc, t.description])).toEqual([
        ["up__echo", true, 1_500, "new text"],
        ["up__sum", false, 0, ""],
        ["up__third", true, 0, ""],
      ]);
      expect((await f.ledger.catalog.upstream("up"))!.refreshedAt).toBe(T0 + 5);
      expect(await conflictOf(f.ledger.catalog.refreshTools("nope", [], T0))).toBe("MISSING");
      expect(await f.ledger.catalog.upstream("nope")).toBeNull();
      expect(await f.ledger.catalog.tool("nope")).toBeNull();
    });
  });

  describe(`ledger contract (${adapter}): records`, () => {
    withLedger("the export comes in pages, in issue order, and ends with what was stored when it began", async (f) => {
      const a = await f.addKey({ orgId: "org_a" });
      const b = await f.addKey({ orgId: "org_b" });
      for (let i = 0; i < 5; i++) await f.settle(await f.reserved(i % 2 === 0 ? a.id : b.id, 1, T0 + i), "charged", T0 + i);
      const pages: number[][] = [];
      for await (const page of f.ledger.records.receiptPages({ orgId: null, sinceMs: null }, 2)) {
        pages.push(page.map((r) => r.issuedAt));
        // stored while the export runs: after its start, so not in it
        if (pages.length === 1) await f.settle(await f.reserved(a.id, 1, T0 + 99), "charged", T0 + 99);
      }
      expect(pages).toEqual([[T0, T0 + 1], [T0 + 2, T0 + 3], [T0 + 4]]);
      const orgPages: number[][] = [];
      for await (const page of f.ledger.records.receiptPages({ orgId: "org_a", sinceMs: null }, 2)) orgPages.push(page.map((r) => r.issuedAt));
      expect(orgPages).toEqual([
        [T0, T0 + 2],
        [T0 + 4, T0 + 99],
      ]);
    });

    withLedger("receipts in issue order, by org and time; the audit log filtered and limited", async (f) => {
      const a = await f.addKey({ orgId: "org_a" });
      const b = await f.addKey({ orgId: "org_b" });
      await f.settle(await f.reserved(a.id, 1, T0), "charged", T0);
      await f.settle(await f.reserved(b.id, 1, T0 + 10), "charged", T0 + 10);
      await f.settle(await f.reserved(a.id, 1, T0 + 20), "refunded_upstream_error", T0 + 20);
      const all = await receiptsOf(f.ledger, { orgId: null, sinceMs: null });
      expect(all.map((r) => [r.keyId, r.outcome, r.issuedAt])).toEqual([
        [a.id, "charged", T0],
        [b.id, "charged", T0 + 10],
        [a.id, "refunded_upstream_error", T0 + 20],
      ]);
      expect((await receiptsOf(f.ledger, { orgId: "org_a", sinceMs: T0 + 1 })).map((r) => r.issuedAt)).toEqual([T0 + 20]);
      expect(await f.ledger.records.receipt(all[1]!.id)).toEqual(all[1]!);
      expect(await f.ledger.records.receipt("rcpt_nope")).toBeNull();
      expect((await f.ledger.records.audit({ orgId: "org_a", keyId: null, sinceMs: null, limit: 10 })).map((e) => e.outcome)).toEqual([
        "charged",
        "refunded_upstream_error",
      ]);
      expect(await f.ledger.records.audit({ orgId: null, keyId: null, sinceMs: T0 + 5, limit: 1 })).toHaveLength(1);
      const charged = (await f.ledger.records.audit({ orgId: null, keyId: b.id, sinceMs: null, limit: 10 }))[0]!;
      expect(charged).toMatchObject({ priceMc: 1, upstreamCostMc: 10, marginMc: -9, httpStatus: 200, receiptId: all[1]!.id });
    });

    withLedger("signing keys: a new one retires the previous; every one stays listed", async (f) => {
      const next = loadSigner(generateSigningKey().privatePem);
      await f.ledger.records.addSigningKey(next.kid, next.publicJwk(), T0 + 100);
      const listed = await f.ledger.records.signingKeys();
      expect(listed.map((k) => [k.kid, k.retiredAt]).sort()).toEqual(
        [
          [SIGNER.kid, T0 + 100],
          [next.kid, null],
        ].sort(),
      );
      expect(listed.find((k) => k.kid === next.kid)!.publicJwk).toEqual(next.publicJwk());
      // Publishing the current key again (a restart) retires nothing.
      await f.ledger.records.addSigningKey(next.kid, next.publicJwk(), T0 + 200);
      expect((await f.ledger.records.signingKeys()).filter((k) => k.retiredAt === null).map((k) => k.kid)).toEqual([next.kid]);
    });

    withLedger("meta: set once, then kept", async (f) => {
      expect(await f.ledger.records.meta("admin_token_sha256")).toBeNull();
      expect(await f.ledger.records.setMetaOnce("admin_token_sha256", "one")).toBe(true);
      expect(await f.ledger.records.setMetaOnce("admin_token_sha256", "two")).toBe(false);
      expect(await f.ledger.records.meta("admin_token_sha256")).toBe("one");
    });
  });

  describe(`ledger contract (${adapter}): sandbox`, () => {
    withLedger("settings set, changed and cleared; grants stop at the network's and the day's limits", async (f) => {
      expect(await f.ledger.sandbox.settings()).toBeNull();
      const settings = { tools: ["up__echo"], budgetMc: 100, ttlS: 3_600, keysPerDay: 3, updatedAt: T0 };
      await f.ledger.sandbox.set(settings);
      await f.ledger.sandbox.set({ ...settings, budgetMc: 200 });
      expect(await f.ledger.sandbox.settings()).toEqual({ ...settings, budgetMc: 200 });
      const grant = (network: string, n: number) => {
        const s = newKeySecret();
        const org = { id: `org_sb_${network}_${n}`, name: "sandbox", createdAt: T0 };
        const key: NewKey = {
          id: `key_sb_${network}_${n}`,
          orgId: org.id,
          name: "sandbox",
          lookup: s.lookup,
          secretSha256: s.hash,
          budgetMc: 200,
          reset: "none",
          period: "none",
          allow: ["up__echo"],
          prices: {},
          expiresAt: T0 + 3_600_000,
          now: T0,
        };
        return f.ledger.sandbox.grant({ day: "2026-11-30", network, limit: 2, dayLimit: 3, org, key });
      };
      expect([await grant("a", 1), await grant("a", 2), await grant("a", 3)]).toEqual([true, true, false]);
      expect([await grant("b", 1), await grant("b", 2)]).toEqual([true, false]);
      expect([await f.ledger.sandbox.grants("2026-11-30", "a"), await f.ledger.sandbox.grants("2026-11-30", "b")]).toEqual([2, 1]);
      expect(await f.ledger.keys.get("key_sb_a_3")).toBeNull();
      expect(await f.ledger.orgs.get("org_sb_b_2")).toBeNull();
      expect(await f.ledger.keys.get("key_sb_b_1")).toMatchObject({ orgId: "org_sb_b_1", budgetMc: 200 });
      expect(await f.ledger.sandbox.clear()).toBe(true);
      expect(await f.ledger.sandbox.clear()).toBe(false);
      expect(await f.ledger.sandbox.settings()).toBeNull();
    });
  });

  describe(`ledger contract (${adapter}): health and check`, () => {
    withLedger("healthy while open; desk check finds a sound ledger sound", async (f) => {
      expect(await f.ledger.healthy()).toBe(true);
      const { id } = await f.addKey();
      await f.settle(await f.reserved(id, 5), "charged");
      expect(await f.ledger.check.money()).toEqual([]);
      const other = await f.addKey();
      await f.settle(await f.reserved(other.id, 1), "charged");
      await f.settle(await f.reserved(id, 1), "charged");
      await f.settle(await f.reserved(id, 1), "refunded_upstream_error");
      const pages: [string, number][][] = [];
      for await (const page of f.ledger.check.receiptsInChainOrder(2)) pages.push(page.map((r) => [r.keyId, r.seq]));
      const [lo, hi] = [id, other.id].sort();
      const chain = (k: string) => (k === id ? [1, 2, 3] : [1]).map((seq) => [k, seq] as [string, number]);
      expect(pages.flat()).toEqual([...chain(lo!), ...chain(hi!)]);
      expect(pages.map((p) => p.length)).toEqual([2, 2]);
    });
  });
}

/** Every receipt of an export, its pages joined. */
export async function receiptsOf(ledger: DeskLedger, filter: { orgId: string | null; sinceMs: number | null }): Promise<ReceiptRecord[]> {
  const all: ReceiptRecord[] = [];
  for await (const page of ledger.records.receiptPages(filter, 1000)) all.push(...page);
  return all;
}
