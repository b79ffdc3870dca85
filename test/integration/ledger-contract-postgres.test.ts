// The ledger contracts (test/helpers/ledger-contract.ts, its finance part in
// test/helpers/finance-ledger-contract.ts, and the upstreams' and approvals' in
// test/helpers/upstream-ledger-contract.ts and approval-ledger-contract.ts) on the PostgreSQL adapter, each test on a fresh
// database of one embedded server, opened as a desk node holding its lease.
import { parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { describe, expect, test } from "bun:test";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { insertAlert } from "../../src/adapters/postgres/org-money.ts";
import type { NewAlert } from "../../src/core/finance/alerts.ts";
import { describeAlertOutboxContract } from "../helpers/alert-outbox-contract.ts";
import { financeLedgerContract } from "../helpers/finance-ledger-contract.ts";
import { describeApprovalLedgerContract } from "../helpers/approval-ledger-contract.ts";
import { ledgerContract } from "../helpers/ledger-contract.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { describeUpstreamLedgerContract } from "../helpers/upstream-ledger-contract.ts";

const pg = usePostgres();

async function open() {
  const { url } = await pg.server.createDatabase();
  const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: 8 } });
  return {
    ledger,
    close: () => ledger.close(),
    auditRows: async () => ((await ledger.testOnlySql()`SELECT count(*)::int AS n FROM audit`) as { n: number }[])[0]!.n,
  };
}

ledgerContract("PostgreSQL", open);
financeLedgerContract("PostgreSQL", open, async (ledger, statement) => {
  await (ledger as PostgresDeskLedger).testOnlySql().unsafe(statement);
});
describeUpstreamLedgerContract("PostgreSQL", open);
describeApprovalLedgerContract("PostgreSQL", open);

// The alert outbox on PostgreSQL: the delivery loop's contract, and leases on a shared ledger.
let alertSerial = 0;
const alert = (id: string, body: string, atMs: number): NewAlert => ({
  id,
  scope: "org",
  subjectId: "org_c",
  orgId: "org_c",
  keyId: "key_c",
  period: "none",
  thresholdPct: 80,
  // Each alert its own unique row: the contract writes many at one moment.
  budgetMc: ++alertSerial,
  body,
  createdAt: atMs,
});

describeAlertOutboxContract("the PostgreSQL desk ledger", async () => {
  const { ledger, close } = await open();
  return {
    outbox: ledger.alerts,
    add: async (id, body, atMs) => {
      await insertAlert(ledger.testOnlySql(), alert(id, body, atMs));
    },
    close,
  };
});

describe("alert leases on a shared ledger", () => {
  test("a node frees the leases its id left at its last run, never those of another live node", async () => {
    const { url } = await pg.server.createDatabase();
    const target = parseDatabaseUrl(url);
    const a = await PostgresDeskLedger.open(target, { nodeId: "node-a", pool: { max: 2 } });
    const b = await PostgresDeskLedger.open(target, { nodeId: "node-b", pool: { max: 2 } });
    try {
      const T = 1_795_000_000_000;
      await insertAlert(a.testOnlySql(), alert("alrt_a", "{}", T));
      await insertAlert(a.testOnlySql(), alert("alrt_b", "{}", T));
      expect((await a.alerts.claimDue(T, 1, T + 60_000)).map((x) => x.id)).toEqual(["alrt_a"]);
      // Node b starting its delivery loop leaves node a's attempt alone: no second delivery at once.
      expect(await b.alerts.releaseLeases()).toBe(0);
      expect((await b.alerts.claimDue(T + 1, 10, T + 60_000)).map((x) => x.id)).toEqual(["alrt_b"]);
      // Node a's next run (same id, its lease handed over) frees its own cut attempt at once.
      await a.close();
      const again = await PostgresDeskLedger.open(target, { nodeId: "node-a", pool: { max: 2 } });
      try {
        expect(await again.alerts.releaseLeases()).toBe(1);
        expect((await again.alerts.claimDue(T + 2, 10, T + 60_000)).map((x) => x.id)).toEqual(["alrt_a"]);
      } finally {
        await again.close();
      }
    } finally {
      await a.close();
      await b.close();
    }
  }, 30_000);
});
