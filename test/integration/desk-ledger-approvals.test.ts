// The approval ledger contract (test/helpers/approval-ledger-contract.ts) on the SQLite desk
// ledger, in a file of its own on disk (the production migrations).
import { join } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { describeApprovalLedgerContract } from "../helpers/approval-ledger-contract.ts";
import { tempDir } from "../helpers/tmp.ts";

describeApprovalLedgerContract("SQLite", () => {
  const dir = tempDir("desk-approval-ledger-");
  const ledger = new SqliteDeskLedger(join(dir.path, "desk.db"));
  return {
    ledger,
    close: async () => {
      await ledger.close();
      dir[Symbol.dispose]();
    },
  };
});
