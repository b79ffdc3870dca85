// `npm run bench:desk-check`: how fast `desk check` goes through a large ledger, and in how much
// memory. Fills a SQLite ledger with N real receipts (reservations and charges through the
// ledger port, signed by the desk's own receipt maker), then runs the compiled `desk check` as a
// process with one thread per core, the same check on one thread, and, as the baseline for the
// signature work, `verify-receipt --jsonl` over the same receipts exported as JSONL. Each round
// runs the three in turn, so load on the shared machine hits all of them alike; the figures are
// medians. Peak RSS is the process's VmHWM (/proc/PID/status), sampled while it runs.
// Usage: bun build.ts && bun scripts/bench/desk-check.ts [--receipts N] [--rounds R] [--binary PATH] [--ledger DIR]
//   --ledger DIR keeps the filled ledger in DIR and reuses it when it is there (DIR is created 0700).
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { envelopeText } from "../../src/core/receipt/index.ts";
import { fillReceipts } from "../../test/helpers/receipt-ledger.ts";
import { quantile } from "./lib/measure.ts";

const root = resolve(import.meta.dir, "../..");
const at = (name: string) => process.argv.indexOf(name);
const RECEIPTS = at("--receipts") > 0 ? Number(process.argv[at("--receipts") + 1]) : 200_000;
const ROUNDS = at("--rounds") > 0 ? Number(process.argv[at("--rounds") + 1]) : 3;
const BINARY = at("--binary") > 0 ? resolve(process.argv[at("--binary") + 1]!) : join(root, "dist/ask-only");
const KEPT = at("--ledger") > 0 ? resolve(process.argv[at("--ledger") + 1]!) : null;

const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const hwmMb = (pid: number): number | null => {
  try {
    return Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
  } catch {
    return null; // gone already
  }
};

/** Wall time, the highest VmHWM seen, and the CPU (user + system, every thread) the process used. */
type Run = { seconds: number; peakMb: number; cpuSeconds: number; stdout: string; stderr: string };

/** Runs `argv` to its end: wall time, and the highest VmHWM seen while it ran. */
async function measured(argv: string[], env: Record<string, string> = {}): Promise<Run> {
  const t = performance.now();
  const proc = Bun.spawn(argv, { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NO_COLOR: "1", TZ: "Etc/UTC", ...env }, stdout: "pipe", stderr: "pipe" });
  let peakMb = 0;
  const sampler = setInterval(() => {
    peakMb = Math.max(peakMb, hwmMb(proc.pid) ?? 0);
  }, 25);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearInterval(sampler);
  const seconds = (performance.now() - t) / 1000;
  if (code !== 0) throw new Error(`${argv.join(" ")} exited ${code}:\n${stdout}${stderr}`);
  const cpuSeconds = Number(proc.resourceUsage()?.cpuTime.total ?? 0n) / 1e6;
  return { seconds, peakMb, cpuSeconds, stdout, stderr };
}

const scratch = mkdtempSync(join(tmpdir(), "ask-only-bench-check-"));
const data = KEPT ?? join(scratch, "d");
try {
  const dbPath = join(data, "desk.db");
  let fillSeconds: number | null = null;
  if (!existsSync(dbPath)) {
    mkdirSync(data, { recursive: true, mode: 0o700 });
    chmodSync(data, 0o700);
    const ledger = new SqliteDeskLedger(dbPath, { backgroundCheckpointMs: 200 });
    const t = performance.now();
    await fillReceipts(ledger, RECEIPTS, {
      onProgress: (done) => {
        if (done % 100_000 === 0 && done > 0) console.error(`  filled ${done} receipts (${((performance.now() - t) / 1000).toFixed(0)} s)`);
      },
    });
    fillSeconds = (performance.now() - t) / 1000;
    await ledger.close();
    chmodSync(dbPath, 0o600);
  }

  // The same receipts as a JSONL export and the desk's key set, for verify-receipt.
  const ledger = new SqliteDeskLedger(dbPath);
  const jsonl = join(scratch, "export.jsonl");
  const jwks = join(scratch, "jwks.json");
  let count = 0;
  const lines: string[] = [];
  writeFileSync(jsonl, "");
  for await (const page of ledger.check.receiptsInChainOrder(5000)) {
    for (const r of page) lines.push(r.envelope ?? envelopeText(r));
    count += page.length;
    writeFileSync(jsonl, `${lines.join("\n")}\n`, { flag: "a" });
    lines.length = 0;
  }
  writeFileSync(jwks, JSON.stringify({ keys: (await ledger.records.signingKeys()).map((k) => k.publicJwk) }));
  await ledger.close();

  const runs = { threads: [] as Run[], one: [] as Run[], verify: [] as Run[] };
  for (let r = 0; r < ROUNDS; r++) {
    runs.threads.push(await measured([BINARY, "desk", "check", "--data", data]));
    runs.one.push(await measured([BINARY, "desk", "check", "--data", data], { ASK_ONLY_DESK_CHECK_THREADS: "1" }));
    runs.verify.push(await measured([BINARY, "verify-receipt", "--jsonl", jsonl, "--keys", jwks]));
    console.error(`  round ${r + 1}/${ROUNDS} done; load average ${loadAverage()}`);
  }
  const last = runs.threads[runs.threads.length - 1]!;
  if (!last.stdout.includes(`ok: ${count} receipts: signatures, readable copies and`))
    throw new Error(`desk check did not pass:\n${last.stdout}${last.stderr}`);

  const median = (xs: Run[], f: (x: Run) => number) => quantile(xs.map(f), 0.5);
  const rate = (xs: Run[]) => Math.round(count / median(xs, (x) => x.seconds));
  // CPU per receipt does not depend on what the rest of the machine is doing; cores used
  // (CPU / wall) says how much of the machine the run got.
  const line = (label: string, xs: Run[]) =>
    `  ${label.padEnd(44)} ${String(rate(xs)).padStart(7)} receipts/s   wall ${median(xs, (x) => x.seconds).toFixed(1)} s   CPU ${(
      (median(xs, (x) => x.cpuSeconds) / count) * 1e6
    ).toFixed(
      0,
    )} µs/receipt   cores used ${median(xs, (x) => x.cpuSeconds / x.seconds).toFixed(2)}   peak RSS ${Math.max(...xs.map((x) => x.peakMb)).toFixed(0)} MB`;
  console.log(
    `desk check benchmark: ${count} receipts (32 keys)${fillSeconds === null ? ", ledger reused" : `, filled in ${fillSeconds.toFixed(0)} s`}; ${ROUNDS} rounds, medians`,
  );
  console.log(line(`desk check, ${availableParallelism()} threads (one per core)`, runs.threads));
  console.log(line("desk check, ASK_ONLY_DESK_CHECK_THREADS=1", runs.one));
  console.log(line("verify-receipt --jsonl, same receipts", runs.verify));
  console.log(
    `  ratios: threads/one thread ${(rate(runs.threads) / rate(runs.one)).toFixed(2)}, threads/verify-receipt ${(rate(runs.threads) / rate(runs.verify)).toFixed(2)}   (target >= 20,000 receipts/s, <= 200 MB at 1M)`,
  );
  console.log(`  machine: load average ${loadAverage()} on ${availableParallelism()} cores`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
