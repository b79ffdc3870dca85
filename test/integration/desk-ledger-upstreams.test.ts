// The upstream ledger contract (test/helpers/upstream-ledger-contract.ts) on the SQLite desk
// ledger, in a file of its own on disk (the production migrations).
import { join } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { tempDir } from "../helpers/tmp.ts";
import { describeUpstreamLedgerContract } from "../helpers/upstream-ledger-contract.ts";

describeUpstreamLedgerContract("SQLite", () => {
  const dir = tempDir("desk-upstream-ledger-");
  const ledger = new SqliteDeskLedger(join(dir.path, "desk.db"));
  return {
    ledger,
    close: async () => {
      await ledger.close();
      dir[Symbol.dispose]();
    },
  };
});
