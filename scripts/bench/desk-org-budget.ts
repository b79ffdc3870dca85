// What an organization budget costs on the clearing path: CPU (user + system µs, process.cpuUsage)
// per reservation + charge, through the SQLite ledger as the desk drives it (64 in flight, group
// commits), for keys of an org without a budget (the baseline) and of an org with one (checked in
// the reservation statement, its spend and charged-per-period written, its alert thresholds read).
// The two run in alternating rounds over one ledger; figures are medians.
// Usage: bun scripts/bench/desk-org-budget.ts [--count N] [--rounds R]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { hourOf, periodOf } from "../../src/core/desk/period.ts";
import type { DeskKey } from "../../src/core/desk/records.ts";
import { Signing } from "../../src/core/desk/signing.ts";
import { generateSigningKey, loadSigner } from "../../src/core/receipt/index.ts";

const flag = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) || fallback : fallback;
};
const COUNT = flag("--count", 3000);
const ROUNDS = flag("--rounds", 5);

const dir = mkdtempSync(join(tmpdir(), "desk-org-budget-"));
const ledger = new SqliteDeskLedger(join(dir, "desk.db"), { backgroundCheckpointMs: 200 });
const signing = new Signing(loadSigner(generateSigningKey().privatePem), ledger.records, () => {}, Date.now);
await signing.publish();

async function orgKeys(name: string): Promise<DeskKey[]> {
  const orgId = `org_${name}`;
  await ledger.orgs.create({ id: orgId, name, createdAt: Date.now() });
  const keys: DeskKey[] = [];
  for (let i = 0; i < 100; i++) {
    const id = `key_${name}_${i}`;
    await ledger.keys.create({
      id,
      orgId,
      name: id,
      lookup: `lookup_${name}_${i}`,
      secretSha256: new Uint8Array(32),
      budgetMc: 1e12,
      reset: "none",
      period: "none",
      allow: ["t"],
      prices: {},
      expiresAt: null,
      now: Date.now(),
    });
    keys.push((await ledger.keys.get(id))!);
  }
  return keys;
}

const plain = await orgKeys("plain");
const budgeted = await orgKeys("budgeted");
const set = await ledger.finance.setBudget({ orgId: "org_budgeted", budgetMc: 1e14, reset: "monthly", now: Date.now() }, signing.recordMaker());
if (set.kind !== "set") throw new Error(set.kind);

async function cpuPerCall(keys: DeskKey[]): Promise<number> {
  let next = 0;
  const one = async () => {
    const i = next++;
    const now = Date.now();
    const ctx = {
      key: keys[i % 100]!,
      tool: "t",
      priceMc: 1,
      upstreamCostMc: 0,
      paramsSha256: "0".repeat(64),
      now,
      hour: hourOf(now),
      period: periodOf("none", now),
    };
    const r = await ledger.money.reserve(ctx, signing.receiptMaker().make);
    if (r.kind !== "reserved") throw new Error(r.kind);
    await ledger.money.settle(
      { reservationId: r.reservationId, outcome: "charged", resultSha256: "1".repeat(64), now: Date.now() },
      signing.receiptMaker().make,
    );
  };
  const c0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < COUNT) await one();
    }),
  );
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / COUNT;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
try {
  await cpuPerCall(plain);
  await cpuPerCall(budgeted);
  const without: number[] = [];
  const withBudget: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    without.push(await cpuPerCall(plain));
    withBudget.push(await cpuPerCall(budgeted));
  }
  const a = median(without);
  const b = median(withBudget);
  console.log(`reserve + charge, 64 in flight, ${COUNT} calls x ${ROUNDS} rounds (median CPU per call)`);
  console.log(`  org without a budget (baseline): ${a.toFixed(1)} µs`);
  console.log(`  org with a budget:               ${b.toFixed(1)} µs`);
  console.log(`  ratio: ${(b / a).toFixed(2)} (+${(b - a).toFixed(1)} µs per call)`);
  const problems = await ledger.check.money();
  if (problems.length > 0) throw new Error(`desk check: ${problems.join("; ")}`);
} finally {
  await ledger.close();
  rmSync(dir, { recursive: true, force: true });
}
