// A separate process for the multi-process tests: opens the same desk.db through the ledger
// module and tries to reserve `attempts` times at the given instant. Prints one JSON line:
// {"reserved": n, "refused": m}. Usage: bun desk-reserve-worker.ts DB KEY_ID ISO_NOW PRICE ATTEMPTS SIGNING_PEM_FILE
import { readFileSync } from "node:fs";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { hourOf, periodOf } from "../../src/core/desk/period.ts";
import { receiptMakerFor } from "../../src/core/desk/receipt-maker.ts";
import { loadSigner } from "../../src/core/receipt/index.ts";

const [db, keyId, iso, price, attempts, pemFile] = process.argv.slice(2) as [string, string, string, string, string, string];
const ledger = new SqliteDeskLedger(db);
const signer = loadSigner(readFileSync(pemFile, "utf8"));
const make = receiptMakerFor(signer);
const now = Date.parse(iso);
let reserved = 0;
let refused = 0;
for (let i = 0; i < Number(attempts); i++) {
  const key = (await ledger.keys.get(keyId))!;
  const r = await ledger.money.reserve(
    {
      key,
      tool: "fx__echo",
      priceMc: Number(price),
      upstreamCostMc: 0,
      paramsSha256: "0".repeat(64),
      now,
      hour: hourOf(now),
      period: periodOf(key.reset, now),
    },
    make,
  );
  if (r.kind === "reserved") reserved++;
  else refused++;
}
await ledger.close();
process.stdout.write(`${JSON.stringify({ reserved, refused })}\n`);
