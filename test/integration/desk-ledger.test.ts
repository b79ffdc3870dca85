// The desk ledger on a real SQLite file with the production migrations: the money invariants,
// the period reset folded into the reservation, refunds to the period of origin, append-only
// receipts and audit, and exactly-one-success across separate processes.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { hourOf, periodOf, type Reset } from "../../src/core/desk/period.ts";
import { newKeySecret } from "../../src/core/desk/secrets.ts";
import { schemaVersion } from "../../src/adapters/sqlite/database.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { mcpConnector } from "../../src/adapters/mcp-upstream/connector.ts";
import { restConnector } from "../../src/adapters/rest-upstream/connector.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import type { CallContext } from "../../src/core/desk/ports.ts";
import { DESK_MIGRATIONS } from "../../src/adapters/sqlite/desk/migrations.ts";
import { generateSigningKey, loadSigner } from "../../src/core/receipt/index.ts";
import { Desk } from "../../src/core/desk/desk.ts";
import { importSealingKey } from "../../src/core/desk/seal.ts";
import { tempDir } from "../helpers/tmp.ts";

const PEM = generateSigningKey().privatePem;

async function setup(now: () => number) {
  const tmp = tempDir("desk-ledger-");
  const dbPath = join(tmp.path, "desk.db");
  const ledger = new SqliteDeskLedger(dbPath);
  const desk = await Desk.open({
    ledger,
    connectors: { mcp: mcpConnector, rest: restConnector },
    openCredential,
    signer: loadSigner(PEM),
    sealingKey: await importSealingKey(new Uint8Array(32)),
    now,
  });
  await ledger.orgs.create({ id: "org_a", name: "a", createdAt: now() });
  const addKey = (id: string, budget: number, reset: Reset) => {
    const s = newKeySecret();
    return ledger.keys.create({
      id,
      orgId: "org_a",
      name: id,
      lookup: s.lookup,
      secretSha256: s.hash,
      budgetMc: budget,
      reset,
      period: periodOf(reset, now()),
      allow: [],
      prices: {},
      expiresAt: null,
      now: now(),
    });
  };
  const ctx = async (keyId: string, price: number): Promise<CallContext> => {
    const key = (await ledger.keys.get(keyId))!;
    const t = now();
    return { key, tool: "fx__echo", priceMc: price, upstreamCostMc: 10, paramsSha256: "a".repeat(64), now: t, hour: hourOf(t), period: periodOf(key.reset, t) };
  };
  const reserve = async (keyId: string, price: number) => ledger.money.reserve(await ctx(keyId, price), desk.receiptMaker().make);
  const settle = (id: number, outcome: "charged" | "refunded_upstream_error") =>
    ledger.money.settle({ reservationId: id, outcome, resultSha256: outcome === "charged" ? "b".repeat(64) : null, now: now() }, desk.receiptMaker().make);
  return {
    tmp,
    dbPath,
    ledger,
    desk,
    addKey,
    ctx,
    reserve,
    settle,
    async [Symbol.asyncDispose]() {
      await desk.close();
      await ledger.close();
      tmp[Symbol.dispose]();
    },
  };
}

describe("desk ledger", () => {
  test("opens at the newest migration with WAL", async () => {
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    expect(schemaVersion(s.ledger.testOnlyDatabase())).toBe(DESK_MIGRATIONS.length);
    expect(s.ledger.testOnlyDatabase().query("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
    expect(s.ledger.testOnlyDatabase().query("PRAGMA synchronous").get()).toEqual({ synchronous: 1 }); // NORMAL
  });

  test("receipts and the audit log refuse UPDATE and DELETE, even as raw SQL", async () => {
    let t = Date.parse("2026-11-30T10:00:00Z");
    await using s = await setup(() => t);
    await s.addKey("key_a", 1000, "none");
    const r = await s.reserve("key_a", 100);
    if (r.kind !== "reserved") throw new Error("expected a reservation");
    await s.settle(r.reservationId, "charged");
    // A call without a receipt writes the audit log's one row; the charge's entry is read out of its receipt.
    await s.ledger.money.recordPlainRefusal(await s.ctx("key_a", 0), "refused_tool_unknown");
    t += 1;
    const raw = new Database(s.dbPath);
    try {
      expect(raw.query("SELECT count(*) AS n FROM receipts").get()).toEqual({ n: 1 });
      expect(raw.query("SELECT outcome, receipt_id FROM audit").all()).toEqual([{ outcome: "refused_tool_unknown", receipt_id: null }]);
      expect(() => raw.run("UPDATE receipts SET issued_at = 1")).toThrow(/append-only/);
      // Every other column is read out of the signed payload: there is nothing of it to change apart.
      expect(() => raw.run("UPDATE receipts SET amount_mc = 1")).toThrow(/generated column/);
      expect(() => raw.run("DELETE FROM receipts")).toThrow(/append-only/);
      expect(() => raw.run("UPDATE audit SET price_mc = 1")).toThrow(/append-only/);
      expect(() => raw.run("DELETE FROM audit")).toThrow(/append-only/);
      // An audit row naming the receipt would stand in for the receipt's signed entry.
      const receiptId = (raw.query("SELECT id FROM receipts").get() as { id: string }).id;
      expect(() =>
        raw.run(
          `INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
           SELECT 1, org_id, key_id, tool, 'charged', 200, 100, 0, 100, ? FROM audit`,
          [receiptId],
        ),
      ).toThrow(/a receipted call is audited by its receipt/);
      expect(raw.query("SELECT count(*) AS n FROM audit").get()).toEqual({ n: 1 });
      // The CHECK makes spend above the budget impossible whatever writes it.
      expect(() => raw.run("UPDATE keys SET spent_mc = budget_mc + 1")).toThrow(/CHECK constraint/);
      expect(raw.query("SELECT amount_mc FROM receipts").get()).toEqual({ amount_mc: 100 });
    } finally {
      raw.close();
    }
    expect(await s.ledger.check.money()).toEqual([]);
  });

  test("desk check: a receipt row that differs from what was signed is named, whichever column (its org decides who may read it)", async () => {
    const { checkLedger } = await import("../../src/core/desk/check.ts");
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    await s.addKey("key_a", 1000, "none");
    const r = await s.reserve("key_a", 100);
    if (r.kind !== "reserved") throw new Error("expected a reservation");
    await s.settle(r.reservationId, "charged");
    expect((await checkLedger(s.ledger)).problems).toEqual([]);
    // Someone with the file and the SQL to drop the trigger first.
    s.ledger.testOnlyDatabase().run("DROP TRIGGER receipts_no_update");
    // The columns read out of the payload cannot differ from it: SQLite refuses to write them.
    for (const column of ["org_id", "tool", "kid", "amount_mc"]) {
      expect(() => s.ledger.testOnlyDatabase().run(`UPDATE receipts SET ${column} = 0`)).toThrow(/generated column/);
    }
    const ROW = "the ledger row differs from the signed receipt";
    for (const [column, value, named] of [
      ["issued_at", "issued_at + 1", ROW],
      ["sha256", "zeroblob(32)", ROW],
      ["signature", "zeroblob(64)", "signature"],
      ["payload", `replace(payload, '"org_id":"', '"org_id":"x')`, "signature"],
      ["payload", `replace(payload, '"amount_mc":100', '"amount_mc":0')`, "signature"],
    ] as const) {
      s.ledger.testOnlyDatabase().run("SAVEPOINT tamper");
      s.ledger.testOnlyDatabase().run(`UPDATE receipts SET ${column} = ${value}`);
      expect(`${column}: ${(await checkLedger(s.ledger)).problems.some((p) => p.includes(named))}`).toBe(`${column}: true`);
      s.ledger.testOnlyDatabase().run("ROLLBACK TO tamper");
      s.ledger.testOnlyDatabase().run("RELEASE tamper");
    }
  });

  test("the reservation is conditional: room for one price, then a 402 receipt", async () => {
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    await s.addKey("key_a", 150, "none");
    expect((await s.reserve("key_a", 100)).kind).toBe("reserved");
    const second = await s.reserve("key_a", 100);
    expect(second.kind).toBe("no_room");
    if (second.kind === "no_room") {
      expect(second.remainingMc).toBe(50);
      const env = JSON.parse(second.receipt.envelope);
      expect(env.receipt).toMatchObject({ outcome: "refused_budget", http_status: 402, amount_mc: 0, remaining_mc: 50, seq: 1, prev_sha256: null });
    }
    expect((await s.ledger.keys.get("key_a"))!.spentMc).toBe(100);
    expect(await s.ledger.check.money()).toEqual([]);
  });

  for (const [reset, before, after, oldPeriod, newPeriod] of [
    ["daily", "2026-11-30T23:59:59.900Z", "2026-12-01T00:00:00.100Z", "2026-11-30", "2026-12-01"],
    ["monthly", "2026-11-30T23:59:59.900Z", "2026-12-01T00:00:00.100Z", "2026-11", "2026-12"],
  ] as const) {
    test(`${reset}: a refund after the UTC reset goes back to the old period, never into the new one`, async () => {
      let t = Date.parse(before);
      await using s = await setup(() => t);
      await s.addKey("key_a", 100, reset);
      const old = await s.reserve("key_a", 100);
      if (old.kind !== "reserved") throw new Error("expected a reservation");
      expect((await s.reserve("key_a", 100)).kind).toBe("no_room");
      t = Date.parse(after);
      // The reset is folded into the reservation: the new period opens with the full budget, once.
      const fresh = await s.reserve("key_a", 100);
      expect(fresh.kind).toBe("reserved");
      expect((await s.reserve("key_a", 1)).kind).toBe("no_room");
      const refund = await s.settle(old.reservationId, "refunded_upstream_error");
      if (refund.kind !== "settled") throw new Error("expected a settlement");
      expect(JSON.parse(refund.receipt.envelope).receipt).toMatchObject({ outcome: "refunded_upstream_error", period: oldPeriod, amount_mc: 0 });
      // The new period is still fully spent: the refund did not land in it.
      expect(await s.ledger.keys.get("key_a")).toMatchObject({ period: newPeriod, spentMc: 100 });
      expect((await s.reserve("key_a", 1)).kind).toBe("no_room");
      const spend = s.ledger.testOnlyDatabase().query("SELECT period, spent_mc FROM spend WHERE key_id = 'key_a' ORDER BY period").all();
      expect(spend).toEqual([
        { period: oldPeriod, spent_mc: 0 },
        { period: newPeriod, spent_mc: 100 },
      ]);
      expect(await s.ledger.check.money()).toEqual([]);
    });
  }

  test("a clock stepping back never reopens a spent period", async () => {
    let t = Date.parse("2026-12-01T00:00:05Z");
    await using s = await setup(() => t);
    await s.addKey("key_a", 100, "daily");
    expect((await s.reserve("key_a", 100)).kind).toBe("reserved");
    t = Date.parse("2026-11-30T23:59:59Z");
    expect((await s.reserve("key_a", 100)).kind).toBe("no_room");
    expect(await s.ledger.check.money()).toEqual([]);
  });

  test("checkMoney finds spend that no charge or reservation explains", async () => {
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    await s.addKey("key_a", 1000, "none");
    const r = await s.reserve("key_a", 100);
    if (r.kind !== "reserved") throw new Error("expected a reservation");
    await s.settle(r.reservationId, "charged");
    expect(await s.ledger.check.money()).toEqual([]);
    s.ledger.testOnlyDatabase().run("UPDATE spend SET spent_mc = spent_mc + 7");
    expect((await s.ledger.check.money()).join("\n")).toContain("key key_a period none: spent 107 mc, but charges 100 + open reservations 0");
  });

  test("group commit: operations queued together share one commit; one that throws rolls back alone", async () => {
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    await s.addKey("key_a", 1000, "none");
    const watcher = new Database(s.dbPath);
    const version = () => (watcher.query("PRAGMA data_version").get() as { data_version: number }).data_version;
    try {
      const before = version();
      const results = await Promise.allSettled([
        s.reserve("key_a", 100),
        s.ledger.testOnlyGroupCommit(() =>
          s.ledger.testOnlyDatabase().transaction(() => {
            s.ledger.testOnlyDatabase().run("INSERT INTO orgs (id, name, created_at) VALUES ('org_bad', 'bad', 1)");
            throw new Error("boom");
          })(),
        ),
        s.reserve("key_a", 100),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      expect(version()).toBe(before + 1);
      expect(await s.ledger.orgs.get("org_bad")).toBeNull();
      expect((await s.ledger.keys.get("key_a"))!.spentMc).toBe(200);
      expect(await s.ledger.money.openReservations(Number.POSITIVE_INFINITY)).toHaveLength(2);
      expect(await s.ledger.check.money()).toEqual([]);
    } finally {
      watcher.close();
    }
  });

  test("group commit: a batch where nothing throws runs each operation once", async () => {
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    await s.addKey("key_a", 1000, "none");
    const db = s.ledger.testOnlyDatabase();
    const runs = new Map<string, number>();
    const addOrg = (id: string) =>
      s.ledger.testOnlyGroupCommit(() => {
        runs.set(id, (runs.get(id) ?? 0) + 1);
        db.run("INSERT INTO orgs (id, name, created_at) VALUES (?, 'x', 1)", [id]);
      });
    await Promise.all([addOrg("org_1"), s.reserve("key_a", 100), addOrg("org_2")]);
    expect([...runs]).toEqual([
      ["org_1", 1],
      ["org_2", 1],
    ]);
  });

  test("group commit: when one operation throws, the others run again each alone and count once", async () => {
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    await s.addKey("key_a", 1000, "none");
    const db = s.ledger.testOnlyDatabase();
    const watcher = new Database(s.dbPath);
    const version = () => (watcher.query("PRAGMA data_version").get() as { data_version: number }).data_version;
    try {
      const before = version();
      const results = await Promise.allSettled([
        s.reserve("key_a", 100),
        s.ledger.testOnlyGroupCommit(() => db.run("INSERT INTO orgs (id, name, created_at) VALUES ('org_ok', 'ok', 1)")),
        s.ledger.testOnlyGroupCommit(() => {
          db.run("INSERT INTO orgs (id, name, created_at) VALUES ('org_bad', 'bad', 1)");
          throw new Error("boom");
        }),
        s.reserve("key_a", 100),
      ]);
      expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled", "rejected", "fulfilled"]);
      // The first run rolled back whole (a second INSERT of org_ok would have failed on its key).
      expect(version()).toBe(before + 1);
      expect(await s.ledger.orgs.get("org_ok")).not.toBeNull();
      expect(await s.ledger.orgs.get("org_bad")).toBeNull();
      expect((await s.ledger.keys.get("key_a"))!.spentMc).toBe(200);
      expect(await s.ledger.money.openReservations(Number.POSITIVE_INFINITY)).toHaveLength(2);
      expect(await s.ledger.check.money()).toEqual([]);
    } finally {
      watcher.close();
    }
  });

  test("a worker thread checkpoints the WAL; the desk's own commits no longer do", async () => {
    const tmp = tempDir("desk-ckpt-");
    const ledger = new SqliteDeskLedger(join(tmp.path, "desk.db"), { backgroundCheckpointMs: 60_000 });
    try {
      expect(ledger.testOnlyDatabase().query("PRAGMA wal_autocheckpoint").get()).toEqual({ wal_autocheckpoint: 20_000 });
      for (let i = 0; i < 200; i++) await ledger.orgs.create({ id: `org_${i}`, name: "x".repeat(3000), createdAt: i });
      const result = await ledger.checkpointNow();
      expect(result!.busy).toBe(0);
      expect(result!.log).toBeGreaterThan(0);
      expect(result!.checkpointed).toBe(result!.log);
      await ledger.stopCheckpointer();
      expect(await ledger.checkpointNow()).toBeNull();
    } finally {
      await ledger.close();
      tmp[Symbol.dispose]();
    }
  });

  async function fourProcesses(s: Awaited<ReturnType<typeof setup>>, iso: string, attempts: number, processes = 4) {
    const pem = join(s.tmp.path, "worker.pem");
    writeFileSync(pem, PEM, { mode: 0o600 });
    const worker = join(import.meta.dir, "desk-reserve-worker.ts");
    const procs = Array.from({ length: processes }, () =>
      Bun.spawn([process.execPath, worker, s.dbPath, "key_a", iso, "100", String(attempts), pem], { stdout: "pipe", stderr: "pipe" }),
    );
    const outs = await Promise.all(
      procs.map(async (p) => {
        const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
        expect({ code, err }).toEqual({ code: 0, err: "" });
        return JSON.parse(out) as { reserved: number; refused: number };
      }),
    );
    return outs;
  }

  test("4 processes racing on a key with room for one: exactly one reservation", async () => {
    await using s = await setup(() => Date.parse("2026-11-30T10:00:00Z"));
    await s.addKey("key_a", 150, "none");
    const outs = await fourProcesses(s, "2026-11-30T10:00:00Z", 25);
    expect(outs.reduce((n, o) => n + o.reserved, 0)).toBe(1);
    expect(outs.reduce((n, o) => n + o.refused, 0)).toBe(99);
    expect((await s.ledger.keys.get("key_a"))!.spentMc).toBe(100);
    expect(await s.ledger.check.money()).toEqual([]);
  });

  test("2 processes racing 50 reservations each on a key with room for all: 20 in flight, the failure limit", async () => {
    const t = Date.parse("2026-11-30T10:00:00Z");
    await using s = await setup(() => t);
    await s.addKey("key_a", 1_000_000, "none");
    const outs = await fourProcesses(s, "2026-11-30T10:00:00Z", 50, 2);
    expect(outs.reduce((n, o) => n + o.reserved, 0)).toBe(20);
    expect(outs.reduce((n, o) => n + o.refused, 0)).toBe(80);
    expect(await s.ledger.keys.get("key_a")).toMatchObject({ failHour: "2026-11-30T10", failCount: 20, spentMc: 2000 });
    // The refusals were at the limit: an audit row each, no receipt, no count.
    expect(s.ledger.testOnlyDatabase().query("SELECT count(*) AS n FROM audit WHERE outcome = 'refused_rate_limited'").get()).toEqual({ n: 80 });
    expect(s.ledger.testOnlyDatabase().query("SELECT count(*) AS n FROM receipts").get()).toEqual({ n: 0 });
  });

  test("a call counts as failing from its reservation: a charge takes it back (in its own hour), a refund keeps it", async () => {
    let t = Date.parse("2026-11-30T10:59:59Z");
    await using s = await setup(() => t);
    await s.addKey("key_a", 1_000_000, "none");
    const ids: number[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await s.reserve("key_a", 10);
      if (r.kind !== "reserved") throw new Error(r.kind);
      ids.push(r.reservationId);
    }
    expect((await s.reserve("key_a", 10)).kind).toBe("rate_limited");
    await s.settle(ids[0]!, "charged");
    await s.settle(ids[1]!, "refunded_upstream_error");
    expect((await s.ledger.keys.get("key_a"))!.failCount).toBe(19);
    expect((await s.reserve("key_a", 10)).kind).toBe("reserved");
    expect((await s.reserve("key_a", 10)).kind).toBe("rate_limited");
    // A new hour starts at zero; a charge of a call reserved in the old hour takes nothing from it.
    t = Date.parse("2026-11-30T11:00:00Z");
    expect((await s.reserve("key_a", 10)).kind).toBe("reserved");
    await s.settle(ids[2]!, "charged");
    expect(await s.ledger.keys.get("key_a")).toMatchObject({ failHour: "2026-11-30T11", failCount: 1 });
    expect(await s.ledger.check.money()).toEqual([]);
  });

  test("4 processes racing across a daily reset: the new period opens exactly once", async () => {
    let t = Date.parse("2026-11-30T23:59:59Z");
    await using s = await setup(() => t);
    await s.addKey("key_a", 150, "daily");
    expect((await s.reserve("key_a", 100)).kind).toBe("reserved");
    t = Date.parse("2026-12-01T00:00:01Z");
    const outs = await fourProcesses(s, "2026-12-01T00:00:01Z", 25);
    expect(outs.reduce((n, o) => n + o.reserved, 0)).toBe(1);
    expect(await s.ledger.keys.get("key_a")).toMatchObject({ period: "2026-12-01", spentMc: 100 });
    expect(await s.ledger.check.money()).toEqual([]);
  });
});
