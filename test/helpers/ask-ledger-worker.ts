// A separate process that creates pay asks in a shared ask ledger file, for the cross-process
// cap and replay tests. Usage: bun ask-ledger-worker.ts PATH MAX_PENDING ID...
// It prints "ready" once the ledger is open, waits for stdin to close (the start signal, so all
// workers race together), then prints one JSON line: the outcome of each create.
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { PAY_FIELDS } from "./sample-asks.ts";

const [path, maxPending, ...ids] = process.argv.slice(2);
if (!path || !maxPending || ids.length === 0) throw new Error("usage: ask-ledger-worker.ts PATH MAX_PENDING ID...");

const ledger = AskLedger.open(path, () => new Date());
process.stdout.write("ready\n");
await Bun.stdin.text();

const outcomes = ids.map((approval_id) => {
  const result = ledger.create({ kind: "pay", approval_id, ...PAY_FIELDS }, { ttlMs: 600_000, maxPending: Number(maxPending) });
  return result.ok ? "ok" : result.code;
});
ledger.close();
process.stdout.write(`${JSON.stringify(outcomes)}\n`);
