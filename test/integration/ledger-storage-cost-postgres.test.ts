// What a clearing costs the PostgreSQL ledger on disk: N reservations charged through the port
// (the two transactions of the clearing path, real signatures), settled ones pruned, then the
// bytes each table and index holds (pg_relation_size after VACUUM) divided by N. A deleted or
// updated row's old version stays in its table for the next rows (PostgreSQL returns the space
// only on VACUUM FULL): the reservations table holds the window not yet pruned and the key and
// spend rows their versions since the last vacuum, whatever the ledger's size, so they are
// printed but not counted per call. The bound is RELIABILITY.md's, SQLite's 1,200 bytes: a heap
// row and each index entry carry 28 and 16 bytes of their own, and a receipted call writes no
// audit row (its entry is read out of its receipt).
import { expect, test } from "bun:test";
import { parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { hourOf, periodOf } from "../../src/core/desk/period.ts";
import { receiptMakerFor } from "../../src/core/desk/receipt-maker.ts";
import { newId, newKeySecret } from "../../src/core/desk/secrets.ts";
import { generateSigningKey, loadSigner, paramsSha256, resultSha256 } from "../../src/core/receipt/index.ts";
import { usePostgres } from "../helpers/postgres.ts";

const pg = usePostgres();
const CALLS = 5_000;
const IN_FLIGHT = 8;
/** RELIABILITY.md: ledger bytes per call on PostgreSQL (receipts, audit and their indexes). */
const MAX_BYTES_PER_CALL = 1200;
/** Tables whose size is a window or the versions of rows updated in place, not what each call adds. */
const REUSED = /^(reservations|keys|spend|org_budgets|org_spend)/;
const T0 = Date.parse("2026-03-01T10:00:00Z");

test(`a clearing costs the PostgreSQL ledger at most ${MAX_BYTES_PER_CALL} bytes`, { timeout: 300_000 }, async () => {
  const { url } = await pg.server.createDatabase();
  const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: IN_FLIGHT } });
  try {
    const sql = ledger.testOnlySql();
    const signer = loadSigner(generateSigningKey().privatePem);
    await ledger.records.addSigningKey(signer.kid, signer.publicJwk(), T0);
    const make = receiptMakerFor(signer);
    const orgId = newId("org");
    const keyId = newId("key");
    const secret = newKeySecret();
    await ledger.orgs.create({ id: orgId, name: "acme", createdAt: T0 });
    await ledger.keys.create({
      id: keyId,
      orgId,
      name: "agent",
      lookup: secret.lookup,
      secretSha256: secret.hash,
      budgetMc: 1_000_000_000,
      reset: "monthly",
      period: periodOf("monthly", T0),
      allow: ["fx__echo"],
      prices: {},
      expiresAt: null,
      now: T0,
    });
    const sizes = async () => {
      await sql.unsafe("VACUUM");
      const rows = (await sql`
        SELECT c.relname AS name, pg_relation_size(c.oid)::bigint AS bytes FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'ask_only' AND c.relkind IN ('r', 'i', 't')`) as { name: string; bytes: bigint }[];
      return new Map(rows.map((r) => [r.name, Number(r.bytes)]));
    };
    const before = await sizes();
    let sent = 0;
    const worker = async () => {
      while (sent < CALLS) {
        const n = sent++;
        const now = T0 + n;
        const key = (await ledger.keys.get(keyId))!;
        const ctx = {
          key,
          tool: "fx__echo",
          priceMc: 100,
          upstreamCostMc: 10,
          paramsSha256: paramsSha256({ text: `call ${n}` }),
          now,
          hour: hourOf(now),
          period: periodOf("monthly", now),
        };
        const r = await ledger.money.reserve(ctx, make);
        if (r.kind !== "reserved") throw new Error(`call ${n}: ${r.kind}`);
        const result = resultSha256({ content: [{ type: "text", text: `call ${n}` }] });
        expect((await ledger.money.settle({ reservationId: r.reservationId, outcome: "charged", resultSha256: result, now }, make)).kind).toBe("settled");
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    while ((await ledger.money.pruneSettled(T0 + CALLS, 500)) > 0);
    expect(await sql`SELECT count(*)::int AS n FROM reservations`).toEqual([{ n: 1 }] as never);
    const after = await sizes();
    const grown = [...after]
      .map(([name, bytes]) => ({ name, perCall: (bytes - (before.get(name) ?? 0)) / CALLS }))
      .filter((o) => o.perCall > 0.5)
      .sort((a, b) => b.perCall - a.perCall);
    const window = (o: { name: string }) => REUSED.test(o.name);
    const perCall = grown.filter((o) => !window(o)).reduce((sum, o) => sum + o.perCall, 0);
    const lines = grown.map((o) => `  ${o.name.padEnd(32)} ${o.perCall.toFixed(1).padStart(8)} B/call${window(o) ? " (not counted: reused space)" : ""}`);
    console.log(`PostgreSQL ledger bytes per call over ${CALLS} clearings: ${perCall.toFixed(1)}\n${lines.join("\n")}`);
    // A charged call's audit entry is read out of its receipt: the audit log and its indexes do not grow.
    expect(grown.filter((o) => o.name.startsWith("audit"))).toEqual([]);
    expect(perCall).toBeLessThanOrEqual(MAX_BYTES_PER_CALL);
  } finally {
    await ledger.close();
  }
});
