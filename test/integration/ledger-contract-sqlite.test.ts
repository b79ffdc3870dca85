// The ledger contract (test/helpers/ledger-contract.ts) on the SQLite adapter, each test on a
// fresh file.
import { join } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { ledgerContract } from "../helpers/ledger-contract.ts";
import { tempDir } from "../helpers/tmp.ts";

ledgerContract("SQLite", async () => {
  const tmp = tempDir("ledger-contract-");
  const ledger = new SqliteDeskLedger(join(tmp.path, "desk.db"));
  return {
    ledger,
    async close() {
      await ledger.close();
      tmp[Symbol.dispose]();
    },
  };
});
