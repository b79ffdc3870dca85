// The PostgreSQL money path (src/adapters/postgres/money.ts) under real concurrency: many
// connections at once never pass a budget or the failure limit, each key's receipt chain stays
// one unbroken chain whoever appends to it, a reservation is settled once however many try, and
// refunds go back to the period they came from.
import { describe, expect, test } from "bun:test";
import type { SQL } from "bun";
import { checkMoney } from "../../src/adapters/postgres/check.ts";
import { type CallInput, recordPlainRefusal, refuseNotAllowed, reserve, settle } from "../../src/adapters/postgres/money.ts";
import { RECEIPT_COLUMNS, type ReceiptRow, receiptOf } from "../../src/adapters/postgres/rows.ts";
import { hourOf } from "../../src/core/desk/period.ts";
import { verifyChain, verifyEnvelope } from "../../src/core/receipt/index.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { addKey, addNode, freshLedger, signingMaker, type TestLedger } from "../helpers/postgres-ledger.ts";

const pg = usePostgres();

const T = Date.parse("2026-11-30T23:59:58.000Z");
const NO_LIMIT = 1_000_000;

function call(keyId: string, over: Partial<CallInput> = {}): CallInput {
  const now = over.now ?? T;
  return { keyId, tool: "up__search", priceMc: 1000, upstreamCostMc: 300, paramsSha256: "a".repeat(64), now, hour: hourOf(now), period: "none", ...over };
}

/** `count` pools of `size` connections each: separate clients, as separate desk nodes are. */
function nodes(ledger: TestLedger, count: number, size: number): SQL[] {
  return Array.from({ length: count }, () => ledger.pool(size));
}

async function keyRow(sql: SQL, id: string) {
  const [k] = await sql`SELECT spent_mc, period, fail_count, fail_hour, receipt_seq FROM keys WHERE id = ${id}`;
  return { spent: Number(k.spent_mc), period: k.period, failCount: k.fail_count, failHour: k.fail_hour, seq: Number(k.receipt_seq) };
}

/** The key's receipts in chain order: every signature verifies and the chain runs 1..N unbroken. */
async function expectSoundChain(sql: SQL, keyId: string, jwks: Parameters<typeof verifyEnvelope>[1]): Promise<number> {
  const rows = (await sql.unsafe(`SELECT ${RECEIPT_COLUMNS} FROM receipts WHERE key_id = $1 ORDER BY seq`, [keyId])) as ReceiptRow[];
  const envelopes = rows.map((r) => JSON.parse(receiptOf(r).envelope));
  for (const e of envelopes) expect(verifyEnvelope(e, jwks).filter((c) => !c.ok)).toEqual([]);
  expect(verifyChain(envelopes)).toEqual({ keys: envelopes.length > 0 ? 1 : 0, failures: [] });
  expect(envelopes.map((e: { receipt: { seq: number } }) => e.receipt.seq)).toEqual(envelopes.map((_: unknown, i: number) => i + 1));
  return envelopes.length;
}

describe("reservations under concurrency", () => {
  test("400 reservations from 10 clients x 4 connections on a budget with room for 37: exactly 37", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make, jwks } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 37_000 + 999 });
    const node = await addNode(ledger.sql, "node-a");
    const clients = nodes(ledger, 10, 4);
    const results = await Promise.all(Array.from({ length: 400 }, (_, i) => reserve(clients[i % 10]!, call(key.id), node, NO_LIMIT, make)));
    const kinds = results.map((r) => r.kind);
    expect(kinds.filter((k) => k === "reserved")).toHaveLength(37);
    expect(kinds.filter((k) => k === "no_room")).toHaveLength(363);
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 37_000, seq: 363 });
    expect(await ledger.sql`SELECT count(*)::int AS n, sum(price_mc)::bigint AS mc FROM reservations WHERE state = 'open'`).toEqual([
      { n: 37, mc: 37_000n },
    ] as never);
    // Every refusal's receipt sits in one chain that the 363 concurrent refusals appended to.
    expect(await expectSoundChain(ledger.sql, key.id, jwks)).toBe(363);
    expect(await checkMoney(ledger.sql)).toEqual([]);
  });

  test("100 reservations at once on a large budget: exactly 20 run, the failure limit holds the rest (audit rows, no receipts)", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 10_000_000 });
    const node = await addNode(ledger.sql, "node-a");
    const clients = nodes(ledger, 5, 4);
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => reserve(clients[i % 5]!, call(key.id), node, 20, make)));
    expect(results.filter((r) => r.kind === "reserved")).toHaveLength(20);
    expect(results.filter((r) => r.kind === "rate_limited")).toHaveLength(80);
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 20_000, failCount: 20, seq: 0 });
    expect(await ledger.sql`SELECT outcome, count(*)::int AS n FROM audit GROUP BY outcome`).toEqual([{ outcome: "refused_rate_limited", n: 80 }] as never);
  });
});

describe("the receipt chain across connections", () => {
  test("settlements and refusals of one key from eight clients at once form one chain, seq 1..N, every prev_sha256 right", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make, jwks } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 60_000 });
    const node = await addNode(ledger.sql, "node-a");
    const clients = nodes(ledger, 8, 3);
    const reserved = await Promise.all(Array.from({ length: 60 }, (_, i) => reserve(clients[i % 8]!, call(key.id), node, NO_LIMIT, make)));
    const ids = reserved.map((r) => (r.kind === "reserved" ? r.reservationId : -1));
    expect(ids).not.toContain(-1);
    const outcomes = ["charged", "refunded_upstream_error", "refunded_timeout"] as const;
    await Promise.all([
      ...ids.map((id, i) => settle(clients[i % 8]!, id, outcomes[i % 3]!, i % 3 === 0 ? 200 : 502, i % 3 === 0 ? "b".repeat(64) : null, T, make)),
      ...Array.from({ length: 40 }, (_, i) => refuseNotAllowed(clients[(i + 3) % 8]!, call(key.id, { tool: "up__other" }), make)),
      ...Array.from({ length: 20 }, (_, i) => reserve(clients[(i + 5) % 8]!, call(key.id, { priceMc: 100_000 }), node, NO_LIMIT, make)),
    ]);
    expect(await expectSoundChain(ledger.sql, key.id, jwks)).toBe(120);
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 20_000, seq: 120 });
    expect(await checkMoney(ledger.sql)).toEqual([]);
  });
});

describe("settling", () => {
  test("eight clients settling one reservation at once: one settles it, seven find it settled, the money moves once", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make, jwks } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 5000 });
    const node = await addNode(ledger.sql, "node-a");
    const r = await reserve(ledger.sql, call(key.id), node, NO_LIMIT, make);
    if (r.kind !== "reserved") throw new Error(r.kind);
    const clients = nodes(ledger, 8, 1);
    const results = await Promise.all(clients.map((sql) => settle(sql, r.reservationId, "refunded_abandoned", 504, null, T, make)));
    const settled = results.filter((s) => s.kind === "settled");
    expect(settled).toHaveLength(1);
    const receiptId = settled[0]!.kind === "settled" ? settled[0]!.receipt.id : "";
    for (const s of results.filter((s) => s.kind === "already_settled")) {
      expect(s).toMatchObject({ outcome: "refunded_abandoned", receipt: { id: receiptId }, remainingMc: 5000 });
    }
    expect(results.filter((s) => s.kind === "already_settled")).toHaveLength(7);
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 0, seq: 1 });
    expect(await ledger.sql`SELECT spent_mc FROM spend`).toEqual([{ spent_mc: 0n }] as never);
    expect(await expectSoundChain(ledger.sql, key.id, jwks)).toBe(1);
    expect(await checkMoney(ledger.sql)).toEqual([]);
  });

  test("a charge keeps the money and takes back the failure counted at reservation; the receipt says what was paid", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make, envelopes } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 5000 });
    const node = await addNode(ledger.sql, "node-a");
    const r = await reserve(ledger.sql, call(key.id), node, 20, make);
    expect(r).toEqual({ kind: "reserved", reservationId: expect.any(Number), remainingMc: 4000 });
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 1000, failCount: 1 });
    const s = await settle(ledger.sql, (r as { reservationId: number }).reservationId, "charged", 200, "c".repeat(64), T + 5, make);
    expect(s).toMatchObject({ kind: "settled", remainingMc: 4000 });
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 1000, failCount: 0, seq: 1 });
    expect(envelopes[0]!.receipt).toMatchObject({
      outcome: "charged",
      http_status: 200,
      price_mc: 1000,
      amount_mc: 1000,
      upstream_cost_mc: 300,
      remaining_mc: 4000,
      result_sha256: "c".repeat(64),
      seq: 1,
      prev_sha256: null,
    });
    // Its audit entry is read out of the receipt: no audit row is written for it.
    expect(await ledger.sql`SELECT count(*)::int AS n FROM audit`).toEqual([{ n: 0 }] as never);
  });

  test("a refund goes back to the period it was reserved from, never into the new day", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 3000, reset: "daily", period: "2026-11-30" });
    const node = await addNode(ledger.sql, "node-a");
    const before = await reserve(ledger.sql, call(key.id, { period: "2026-11-30" }), node, 20, make);
    const after = T + 5000;
    const next = await reserve(ledger.sql, call(key.id, { now: after, period: "2026-12-01" }), node, 20, make);
    expect(next).toMatchObject({ kind: "reserved", remainingMc: 2000 });
    await settle(ledger.sql, (before as { reservationId: number }).reservationId, "refunded_upstream_error", 502, null, after, make);
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 1000, period: "2026-12-01" });
    expect(await ledger.sql`SELECT period, spent_mc FROM spend ORDER BY period`).toEqual([
      { period: "2026-11-30", spent_mc: 0n },
      { period: "2026-12-01", spent_mc: 1000n },
    ] as never);
    expect(await checkMoney(ledger.sql)).toEqual([]);
  });

  test("the period never moves back: a clock stepping back finds no room in the spent period", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 1000, reset: "daily", period: "2026-12-01" });
    const node = await addNode(ledger.sql, "node-a");
    expect(await reserve(ledger.sql, call(key.id, { period: "2026-12-01" }), node, 20, make)).toMatchObject({ kind: "reserved" });
    expect(await reserve(ledger.sql, call(key.id, { period: "2026-11-30" }), node, 20, make)).toMatchObject({ kind: "no_room", remainingMc: 1000 });
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 1000, period: "2026-12-01" });
  });
});

describe("refusals", () => {
  test("room made between the first try and the refusal's lock is taken, not refused", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 1000 });
    const node = await addNode(ledger.sql, "node-a");
    const first = await reserve(ledger.sql, call(key.id), node, 20, make);
    if (first.kind !== "reserved") throw new Error(first.kind);
    const other = ledger.pool(1);
    const second = await reserve(ledger.sql, call(key.id), node, 20, make, async () => {
      // The key is full when the first statement runs; another node refunds before the refusal locks the row.
      await settle(other, first.reservationId, "refunded_upstream_error", 502, null, T, make);
    });
    expect(second).toMatchObject({ kind: "reserved", remainingMc: 0 });
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 1000, seq: 1 });
    expect(await checkMoney(ledger.sql)).toEqual([]);
  });

  test("a revoked or expired key reserves nothing and writes nothing", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const node = await addNode(ledger.sql, "node-a");
    const revoked = await addKey(ledger.sql, { budgetMc: 5000 });
    await ledger.sql`UPDATE keys SET revoked_at = 1 WHERE id = ${revoked.id}`;
    const expired = await addKey(ledger.sql, { budgetMc: 5000, expiresAt: T });
    expect(await reserve(ledger.sql, call(revoked.id), node, 20, make)).toEqual({ kind: "key_gone" });
    expect(await reserve(ledger.sql, call(expired.id), node, 20, make)).toEqual({ kind: "key_gone" });
    expect(await reserve(ledger.sql, call("key_missing"), node, 20, make)).toEqual({ kind: "key_gone" });
    expect(
      await ledger.sql`SELECT (SELECT count(*) FROM receipts)::int AS r, (SELECT count(*) FROM audit)::int AS a, (SELECT count(*) FROM spend)::int AS s`,
    ).toEqual([{ r: 0, a: 0, s: 0 }] as never);
  });

  test("a reservation under a lease that ran out, or of an older epoch, is refused with nothing written", async () => {
    await using ledger = await freshLedger(pg.server);
    const { make } = signingMaker();
    const key = await addKey(ledger.sql, { budgetMc: 5000 });
    const dead = await addNode(ledger.sql, "node-dead", -1000);
    const live = await addNode(ledger.sql, "node-live");
    expect(await reserve(ledger.sql, call(key.id), dead, 20, make)).toEqual({ kind: "lease_lost" });
    expect(await reserve(ledger.sql, call(key.id), { ...live, epoch: 2 }, 20, make)).toEqual({ kind: "lease_lost" });
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ spent: 0, failCount: 0, seq: 0 });
    expect(await reserve(ledger.sql, call(key.id), live, 20, make)).toMatchObject({ kind: "reserved" });
  });

  test("plain refusals write an audit row and count a failure, but a 429 counts nothing", async () => {
    await using ledger = await freshLedger(pg.server);
    const key = await addKey(ledger.sql, { budgetMc: 5000 });
    await recordPlainRefusal(ledger.sql, call(key.id), "refused_args_invalid", 400);
    await recordPlainRefusal(ledger.sql, call(key.id), "refused_tool_unknown", 404);
    await recordPlainRefusal(ledger.sql, call(key.id), "refused_rate_limited", 429);
    expect(await keyRow(ledger.sql, key.id)).toMatchObject({ failCount: 2, failHour: hourOf(T) });
    expect((await ledger.sql`SELECT outcome, http_status FROM audit ORDER BY id`).map((r: object) => ({ ...r }))).toEqual([
      { outcome: "refused_args_invalid", http_status: 400 },
      { outcome: "refused_tool_unknown", http_status: 404 },
      { outcome: "refused_rate_limited", http_status: 429 },
    ]);
  });
});
