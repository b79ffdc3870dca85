// A separate process for the multi-process sandbox test: opens the same desk.db and asks for
// `attempts` sandbox keys for one network at one instant. Prints {"granted": n, "refused": m}.
// Usage: bun desk-sandbox-worker.ts DB NETWORK ISO_NOW ATTEMPTS
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { newId, newKeySecret } from "../../src/core/desk/secrets.ts";

const [db, network, iso, attempts] = process.argv.slice(2) as [string, string, string, string];
const ledger = new SqliteDeskLedger(db);
const now = Date.parse(iso);
let granted = 0;
let refused = 0;
for (let i = 0; i < Number(attempts); i++) {
  const secret = newKeySecret();
  const orgId = newId("org");
  const ok = await ledger.sandbox.grant({
    day: iso.slice(0, 10),
    network,
    limit: 5,
    dayLimit: 200,
    org: { id: orgId, name: "sandbox", createdAt: now },
    key: {
      id: newId("key"),
      orgId,
      name: "sandbox",
      lookup: secret.lookup,
      secretSha256: secret.hash,
      budgetMc: 2000,
      reset: "none",
      period: "none",
      allow: [],
      prices: {},
      expiresAt: now + 60_000,
      now,
    },
  });
  if (ok) granted++;
  else refused++;
}
await ledger.close();
process.stdout.write(`${JSON.stringify({ granted, refused })}\n`);
