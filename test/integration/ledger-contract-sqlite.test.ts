// The ledger contracts (test/helpers/ledger-contract.ts, its finance part in
// test/helpers/finance-ledger-contract.ts) on the SQLite adapter, each test on a fresh file.
import { join } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { describeAlertOutboxContract } from "../helpers/alert-outbox-contract.ts";
import { financeLedgerContract } from "../helpers/finance-ledger-contract.ts";
import { auditContract, exportContract, ledgerContract } from "../helpers/ledger-contract.ts";
import { tempDir } from "../helpers/tmp.ts";

async function open() {
  const tmp = tempDir("ledger-contract-");
  const ledger = new SqliteDeskLedger(join(tmp.path, "desk.db"));
  return {
    ledger,
    async close() {
      await ledger.close();
      tmp[Symbol.dispose]();
    },
    auditRows: async () => auditRowsOf(ledger),
  };
}

const auditRowsOf = (ledger: SqliteDeskLedger) => (ledger.testOnlyDatabase().query("SELECT count(*) AS n FROM audit").get() as { n: number }).n;

ledgerContract("SQLite", open);
// In memory no second connection opens the ledger: its export is read on the calling thread.
exportContract("SQLite in memory", () => {
  const ledger = new SqliteDeskLedger(":memory:");
  return { ledger, close: () => ledger.close() };
});
auditContract("SQLite in memory", () => {
  const ledger = new SqliteDeskLedger(":memory:");
  return { ledger, close: () => ledger.close(), auditRows: async () => auditRowsOf(ledger) };
});
financeLedgerContract("SQLite", open, async (ledger, statement) => {
  (ledger as SqliteDeskLedger).testOnlyDatabase().run(statement);
});

describeAlertOutboxContract("the SQLite desk ledger", () => {
  const ledger = new SqliteDeskLedger(":memory:");
  ledger.testOnlyDatabase().query("INSERT INTO orgs (id, name, created_at) VALUES ('org_c', 'c', 0)").run();
  // Each alert its own threshold row: the contract writes many at one moment.
  let n = 0;
  return {
    outbox: ledger.alerts,
    add: (id, body, atMs) => {
      ledger.alerts.writeNow([
        { id, scope: "org", subjectId: "org_c", orgId: "org_c", keyId: "key_c", period: "none", thresholdPct: 80, budgetMc: ++n, body, createdAt: atMs },
      ]);
    },
    close: () => ledger.close(),
  };
});
