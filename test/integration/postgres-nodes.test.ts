// Desk nodes sharing one PostgreSQL ledger, through the port and the domain: a dead node's calls
// are refunded exactly once however many live nodes sweep at the same moment; a node's own calls
// left open by its previous run are refunded at its start; a node whose lease is taken from it
// stops taking calls and takes them again once it holds a new lease.
import { describe, expect, test } from "bun:test";
import { parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { mcpConnector } from "../../src/adapters/mcp-upstream/connector.ts";
import { restConnector } from "../../src/adapters/rest-upstream/connector.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { Desk } from "../../src/core/desk/desk.ts";
import { hourOf } from "../../src/core/desk/period.ts";
import { type CallContext, LedgerUnavailable } from "../../src/core/desk/ports.ts";
import { importSealingKey } from "../../src/core/desk/seal.ts";
import { newKeySecret } from "../../src/core/desk/secrets.ts";
import { generateSigningKey, loadSigner } from "../../src/core/receipt/index.ts";
import { receiptsOf } from "../helpers/ledger-contract.ts";
import { usePostgres } from "../helpers/postgres.ts";

const pg = usePostgres();
const NOW = Date.parse("2026-12-01T12:00:00Z");

async function node(url: string, id: string, o: { lease?: { leaseMs: number; renewEveryMs: number; safetyMs: number }; log?: (l: string) => void } = {}) {
  const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: id, pool: { max: 4 }, ...o });
  const desk = await Desk.open({
    ledger,
    connectors: { mcp: mcpConnector, rest: restConnector },
    openCredential,
    signer: loadSigner(generateSigningKey().privatePem),
    sealingKey: await importSealingKey(new Uint8Array(32)),
    now: () => NOW,
  });
  return {
    ledger,
    desk,
    async close() {
      await desk.close();
      await ledger.close();
    },
  };
}

async function keyWithBudget(ledger: PostgresDeskLedger, budgetMc: number) {
  await ledger.orgs.create({ id: "org_n", name: "n", createdAt: NOW });
  const s = newKeySecret();
  await ledger.keys.create({
    id: "key_n",
    orgId: "org_n",
    name: "n",
    lookup: s.lookup,
    secretSha256: s.hash,
    budgetMc,
    reset: "none",
    period: "none",
    allow: ["up__t"],
    prices: {},
    expiresAt: null,
    now: NOW,
  });
  return s;
}

const ctxOf = async (ledger: PostgresDeskLedger, i: number): Promise<CallContext> => ({
  key: (await ledger.keys.get("key_n"))!,
  tool: "up__t",
  priceMc: 10,
  upstreamCostMc: 0,
  paramsSha256: "c".repeat(64),
  now: NOW,
  // Each reservation in an hour of its own: the failure limit counts calls still open.
  hour: hourOf(NOW + i * 3_600_000),
  period: "none",
});

describe("nodes sharing one ledger", () => {
  test("three live nodes sweep a dead node's 30 calls at the same moment: each is refunded exactly once", async () => {
    const { url } = await pg.server.createDatabase();
    const dead = await node(url, "node-dead");
    await keyWithBudget(dead.ledger, 1_000);
    for (let i = 0; i < 30; i++) expect((await dead.ledger.money.reserve(await ctxOf(dead.ledger, i), dead.desk.receiptMaker().make)).kind).toBe("reserved");
    // Its lease ends (a clean stop ends it at once; a killed node's runs out).
    await dead.close();
    const live = await Promise.all(["node-a", "node-b", "node-c"].map((id) => node(url, id)));
    try {
      const refunded = await Promise.all(live.map((n) => n.desk.sweepAbandoned(0)));
      expect(refunded.reduce((a, b) => a + b, 0)).toBe(30);
      const receipts = await receiptsOf(live[0]!.ledger, { orgId: null, sinceMs: null });
      expect(receipts.map((r) => r.outcome)).toEqual(Array(30).fill("refunded_abandoned"));
      expect(receipts.map((r) => r.seq)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      expect((await live[1]!.ledger.keys.get("key_n"))!.spentMc).toBe(0);
      expect(await live[2]!.ledger.check.money()).toEqual([]);
      // Every node's key set lists every node's key, the dead one's too.
      expect((await live[2]!.desk.jwks()).keys).toHaveLength(4);
    } finally {
      await Promise.all(live.map((n) => n.close()));
    }
  });

  test("a node restarted under its id refunds the calls its previous run left open, at start", async () => {
    const { url } = await pg.server.createDatabase();
    const first = await node(url, "node-a");
    await keyWithBudget(first.ledger, 1_000);
    for (let i = 0; i < 3; i++) await first.ledger.money.reserve(await ctxOf(first.ledger, i), first.desk.receiptMaker().make);
    await first.close();
    const again = await node(url, "node-a");
    try {
      expect(await again.desk.sweepAbandoned(Number.POSITIVE_INFINITY)).toBe(3);
      expect((await again.ledger.keys.get("key_n"))!.spentMc).toBe(0);
    } finally {
      await again.close();
    }
  });

  test("a node whose lease is taken from it stops taking calls at once, and takes them again under a new lease", async () => {
    const { url } = await pg.server.createDatabase();
    let duringLoss: Promise<unknown> | null = null;
    const lines: string[] = [];
    const held = Promise.withResolvers<void>();
    let n!: Awaited<ReturnType<typeof node>>;
    const log = (line: string) => {
      lines.push(line);
      // Said the moment the lease is lost, before anything else runs: a call now is refused.
      if (/lease was refused/.test(line)) duringLoss = n.ledger.keys.find(secret.lookup, secret.hash).catch((e: unknown) => e);
      if (/lease held again/.test(line)) held.resolve();
    };
    n = await node(url, "node-a", { lease: { leaseMs: 1_500, renewEveryMs: 300, safetyMs: 300 }, log });
    const secret = await keyWithBudget(n.ledger, 1_000);
    try {
      expect(await n.ledger.healthy()).toBe(true);
      // Another process took the id over (or the database judged the lease run out).
      await n.ledger.testOnlySql()`UPDATE nodes SET expires_at = clock_timestamp() - interval '1 second' WHERE id = 'node-a'`;
      await held.promise;
      expect(duringLoss).not.toBeNull();
      expect(await (duringLoss as unknown as Promise<unknown>)).toBeInstanceOf(LedgerUnavailable);
      expect(await n.ledger.healthy()).toBe(true);
      expect(await n.ledger.keys.find(secret.lookup, secret.hash)).toMatchObject({ id: "key_n" });
      const [row] = await n.ledger.testOnlySql()`SELECT epoch FROM nodes WHERE id = 'node-a'`;
      expect(Number(row.epoch)).toBe(2);
      expect((await n.ledger.money.reserve(await ctxOf(n.ledger, 0), n.desk.receiptMaker().make)).kind).toBe("reserved");
    } finally {
      await n.close();
    }
  });
});
