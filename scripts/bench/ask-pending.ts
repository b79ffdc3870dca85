// `npm run bench:ask-pending`: what the approver's pending queries cost when many asks were
// decided but have not yet expired. The ask ledger on a real file (synchronous=FULL as the
// approver runs it) holds PENDING open asks and, in one run, 0 decided asks (the baseline)
// and then DECIDED decided-but-unexpired ones; it times create, listPending and countPending.
// The ratio is decided over baseline: 1.0 means the cost follows what is pending alone.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { RECAP, TEST_SIGNER } from "../../test/helpers/decision-signer.ts";
import { SAMPLE_PAY } from "../../test/helpers/sample-asks.ts";

const PENDING = Number(process.env.BENCH_PENDING ?? 20);
const DECIDED = Number(process.env.BENCH_DECIDED ?? 6000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 400);
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const TTL = 3_600_000;

function idOf(n: number): string {
  let s = "";
  for (let i = 0; i < 10; i++, n = Math.floor(n / 32)) s = ALPHABET[n % 32] + s;
  return s;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Median microseconds of create (then deny, so the pending set stays PENDING), list and count. */
function measure(decided: number): { create: number; list: number; count: number } {
  const dir = mkdtempSync(join(tmpdir(), "ask-only-bench-pending-"));
  try {
    let ms = Date.UTC(2026, 0, 15, 12);
    const ledger = AskLedger.open(join(dir, "asks.db"), () => new Date(ms), TEST_SIGNER);
    const opts = { ttlMs: TTL, maxPending: PENDING + 1 };
    let next = 0;
    for (let i = 0; i < decided; i++) {
      const id = idOf(next++);
      ledger.create({ ...SAMPLE_PAY, approval_id: id }, opts);
      ledger.decide(id, "denied", { recapSha256: RECAP });
    }
    for (let i = 0; i < PENDING; i++) ledger.create({ ...SAMPLE_PAY, approval_id: idOf(next++) }, opts);
    const create: number[] = [];
    const list: number[] = [];
    const count: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      ms += 1;
      const id = idOf(next++);
      let t = Bun.nanoseconds();
      const made = ledger.create({ ...SAMPLE_PAY, approval_id: id }, opts);
      create.push((Bun.nanoseconds() - t) / 1000);
      if (!made.ok) throw new Error(`create refused: ${made.code}`);
      t = Bun.nanoseconds();
      const pending = ledger.listPending();
      list.push((Bun.nanoseconds() - t) / 1000);
      if (pending.length !== PENDING + 1) throw new Error(`listed ${pending.length} pending, expected ${PENDING + 1}`);
      t = Bun.nanoseconds();
      ledger.countPending();
      count.push((Bun.nanoseconds() - t) / 1000);
      ledger.decide(id, "denied", { recapSha256: RECAP });
    }
    ledger.close();
    return { create: median(create), list: median(list), count: median(count) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const base = measure(0);
const loaded = measure(DECIDED);
console.log(`pending ${PENDING}, decided-but-unexpired ${DECIDED} vs 0, median of ${ROUNDS} (µs)`);
for (const what of ["create", "list", "count"] as const) {
  console.log(
    `${what.padEnd(8)} ${loaded[what].toFixed(1).padStart(9)} µs   baseline ${base[what].toFixed(1).padStart(9)} µs   ratio ${(loaded[what] / base[what]).toFixed(2)}`,
  );
}
