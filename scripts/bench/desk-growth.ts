// `npm run bench:desk-growth`: what the desk costs as its ledger grows. The compiled desk (its own
// process) in front of the fixture upstream (its own process) fills its SQLite ledger through real
// clearings (32 concurrent clients over 100 keys) and, at 0 receipts, at a tenth of the target (at
// most 100k) and at the target, measures:
//   - clearing latency, p50 / p99 of sequential calls;
//   - start-up: the desk stopped and started again on the same data directory, until it listens
//     and until it answers a clearing (median of three), in wall time and in the desk's CPU time
//     (which a loaded machine stretches less);
//   - housekeeping: sequential calls over two runs of the sweeps (--upstream-timeout 5 makes them
//     run every 7.5 s), their p99.9 and the longest; and the same over a window as long on the
//     same desk restarted with --upstream-timeout 300 (no sweep due for 155 s), the baseline that
//     tells the sweeps' stalls from the machine's;
//   - the ledger file and its WAL, and the bytes per stored call;
//   - the whole ledger's export (GET /admin/receipts, read by curl in a process of its own, so the
//     probe's latency is the desk's and not this process's) while a probe keeps clearing calls: its wall
//     time and the desk's CPU time per receipt, the desk's RSS growth (VmRSS sampled every 10 ms,
//     against just before; and the same over the sequential calls, with no export, as a
//     baseline), and the probe's p50 / p99 / longest.
// Each figure is printed with its value at 0 and the ratio, with the load average of the moment.
// Usage: bun build.ts && bun scripts/bench/desk-growth.ts [--receipts N] [--calls N] [--binary PATH] [--keep DIR]
//        --keep DIR leaves the data directory (the filled ledger) in DIR
//        --again DIR measures a ledger kept so at its size, with no fill and no baseline
//        --receipts 1000000 is the full run (18 minutes in all on 2 cores at a load average of 11-16)
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Database } from "bun:sqlite";
import { type BenchDesk, firstLine, quantile, startDesk } from "./lib/measure.ts";

const root = resolve(import.meta.dir, "../..");
const at = (name: string) => process.argv.indexOf(name);
const RECEIPTS = at("--receipts") > 0 ? Number(process.argv[at("--receipts") + 1]) : 100_000;
const SEQUENTIAL = at("--calls") > 0 ? Number(process.argv[at("--calls") + 1]) : 2000;
const BINARY = at("--binary") > 0 ? resolve(process.argv[at("--binary") + 1]!) : join(root, "dist/ask-only");
const AGAIN = at("--again") > 0 ? resolve(process.argv[at("--again") + 1]!) : null;
const KEEP = AGAIN ?? (at("--keep") > 0 ? resolve(process.argv[at("--keep") + 1]!) : null);
const TOKEN = "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz";
const KEYS = 100;
const FILLERS = 32;
/** --upstream-timeout 5: the sweeps run every (5 s + the 10 s abandon margin) / 2. */
const SWEEP_EVERY_MS = 7_500;
const SIZES = [0, Math.min(100_000, Math.floor(RECEIPTS / 10)), RECEIPTS];

const loadAverage = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const statusKb = (pid: number, field: string) =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN);
const sizeOf = (path: string) => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};
const median = (xs: number[]) => quantile(xs, 0.5);
/** CPU milliseconds (user + system) a process has used so far, from /proc (10 ms ticks). */
const cpuMs = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
/** Runs `body` while sampling `pid`'s VmRSS every 10 ms; its result and the peak growth in MB. */
const sampled = async <T>(pid: number, body: () => Promise<T>) => {
  const before = statusKb(pid, "VmRSS") / 1024;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, statusKb(pid, "VmRSS") / 1024);
  }, 10);
  try {
    return { value: await body(), beforeMb: before, growthMb: peak - before };
  } finally {
    clearInterval(sampler);
  }
};

if (KEEP !== null) mkdirSync(KEEP, { recursive: true, mode: 0o700 });
const base = KEEP ?? mkdtempSync(join(tmpdir(), "ask-only-bench-growth-"));
const dataDir = join(base, "d");
/** A kept ledger: its receipts, and the port its upstream was registered on (the fixture starts there again). */
const kept = AGAIN === null ? null : keptLedger(join(dataDir, "desk.db"));
const upstream = Bun.spawn(
  [
    process.execPath,
    "-e",
    `import { startUpstreamFixture } from ${JSON.stringify(join(root, "test/fixtures/upstream-server.ts"))};
     console.log(startUpstreamFixture({ port: ${kept?.port ?? 0} }).url);`,
  ],
  { stdout: "pipe", stderr: "inherit" },
);
const upstreamUrl = await firstLine(upstream.stdout as ReadableStream<Uint8Array>, /(http:\/\/\S+)\n/);
/** The desk on the kept data directory; `timeoutS` sets how often the sweeps run ((timeout + 10 s) / 2). */
const start = (timeoutS = 5) => startDesk([BINARY], TOKEN, { data: dataDir, flags: ["--upstream-timeout", String(timeoutS)] });
let desk: BenchDesk = await start();

type Figures = {
  size: number;
  load: string;
  p50: number;
  p99: number;
  listenMs: number;
  answerMs: number;
  listenCpuMs: number;
  answerCpuMs: number;
  sweepP999: number;
  sweepMax: number;
  sweepOver20: number;
  quietP999: number;
  quietMax: number;
  quietOver20: number;
  dbBytes: number;
  walBytes: number;
  exportSeconds: number;
  exportLines: number;
  exportCpuUs: number;
  rssBeforeMb: number;
  rssGrowthMb: number;
  callsRssGrowthMb: number;
  exportP50: number;
  exportP99: number;
  exportMax: number;
};

function keptLedger(path: string): { receipts: number; port: number } {
  const db = new Database(path, { readonly: true });
  try {
    const receipts = (db.query("SELECT max(rowid) AS n FROM receipts").get() as { n: number | null }).n ?? 0;
    const url = (db.query("SELECT url FROM upstreams WHERE name = 'fx'").get() as { url: string }).url;
    return { receipts, port: Number(new URL(url).port) };
  } finally {
    db.close();
  }
}

try {
  if (kept === null) {
    await desk.admin("POST", "/admin/upstreams", { name: "fx", url: upstreamUrl });
    await desk.admin("PUT", "/admin/tools/fx__echo", { price_mc: 1, upstream_cost_mc: 0 });
  }
  const org = (await desk.admin("POST", "/admin/orgs", { name: "bench" })).org_id as string;
  const keys: string[] = [];
  for (let i = 0; i < KEYS; i++) {
    keys.push((await desk.admin("POST", "/admin/keys", { org_id: org, budget_mc: 1_000_000_000, reset: "none", allow: ["fx__echo"] })).secret as string);
  }
  /** Receipts in the ledger: every call answered 200 left one (and a refused one may have). */
  let stored = kept?.receipts ?? 0;
  /** Calls answered other than 200 (a timeout on a loaded machine): counted, not fatal. */
  let failed = 0;
  const call = async (key: string, i: number) => {
    const r = await fetch(`${desk.url}/v1/tools/fx__echo`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: `{"text":"a typical short argument for a paid tool, call ${i}"}`,
    });
    await r.arrayBuffer();
    if (r.status === 200) stored++;
    else failed++;
  };
  /** Sequential calls until `until` says stop; each one's latency in ms. */
  const probe = async (until: (n: number) => boolean) => {
    const xs: number[] = [];
    do {
      const t = performance.now();
      await call(keys[xs.length % KEYS]!, xs.length);
      xs.push(performance.now() - t);
    } while (!until(xs.length));
    return xs;
  };
  const fill = async (target: number) => {
    const t0 = performance.now();
    const from = stored;
    let started = stored;
    await Promise.all(
      Array.from({ length: FILLERS }, async (_, w) => {
        for (let k = w; started < target; k += FILLERS) {
          started++;
          await call(keys[k % KEYS]!, started);
        }
      }),
    );
    const s = (performance.now() - t0) / 1000;
    if (stored > from)
      console.log(`  filled ${from} -> ${stored} receipts in ${s.toFixed(1)} s (${((stored - from) / s).toFixed(0)} calls/s; load ${loadAverage()})`);
  };

  const restartTimes = async () => {
    const listen: number[] = [];
    const answer: number[] = [];
    const listenCpu: number[] = [];
    const answerCpu: number[] = [];
    for (let i = 0; i < 3; i++) {
      await desk.stop();
      const t0 = performance.now();
      desk = await start();
      listen.push(performance.now() - t0);
      listenCpu.push(cpuMs(desk.proc.pid));
      await call(keys[0]!, 0);
      answer.push(performance.now() - t0);
      answerCpu.push(cpuMs(desk.proc.pid));
    }
    return { listenMs: median(listen), answerMs: median(answer), listenCpuMs: median(listenCpu), answerCpuMs: median(answerCpu) };
  };

  const exportWhole = async () => {
    const pid = desk.proc.pid;
    const cpuBefore = cpuMs(pid);
    let exporting = true;
    const t0 = performance.now();
    const exported = (async () => {
      // A reader as fast as the desk can write: the longest turns of the desk's loop, and the most
      // the stream could pile up if it did not wait for the reader.
      const curl = Bun.spawn(["sh", "-c", `curl -sSf -H "authorization: Bearer $TOKEN" "$URL/admin/receipts" | wc -l`], {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TOKEN, URL: desk.url },
        stdout: "pipe",
        stderr: "inherit",
      });
      const lines = Number((await new Response(curl.stdout).text()).trim());
      await curl.exited;
      exporting = false;
      return lines;
    })();
    const before = stored;
    const { value: during, beforeMb, growthMb } = await sampled(pid, () => probe(() => !exporting));
    const lines = await exported;
    const exportSeconds = (performance.now() - t0) / 1000;
    const cpu = cpuMs(pid) - cpuBefore;
    // every receipt stored before the export began, and perhaps some of the probe's
    if (lines < before) throw new Error(`exported ${lines} lines, expected at least ${before}`);
    return {
      exportSeconds,
      exportLines: lines,
      exportCpuUs: lines === 0 ? Number.NaN : (cpu * 1000) / lines,
      rssBeforeMb: beforeMb,
      rssGrowthMb: growthMb,
      exportP50: quantile(during, 0.5),
      exportP99: quantile(during, 0.99),
      exportMax: Math.max(...during),
    };
  };

  const measureAt = async (size: number): Promise<Figures> => {
    await fill(size);
    const restart = await restartTimes();
    await probe((n) => n >= 300);
    const { value: seq, growthMb: callsRssGrowthMb } = await sampled(desk.proc.pid, () => probe((n) => n >= SEQUENTIAL));
    const windowEnd = performance.now() + 2 * SWEEP_EVERY_MS + 1000;
    const window = await probe(() => performance.now() >= windowEnd);
    // read before the restart below, which checkpoints the WAL away
    const walBytes = sizeOf(join(dataDir, "desk.db-wal"));
    // The baseline: as long a window with no sweep due, then the desk as it was.
    await desk.stop();
    desk = await start(300);
    await probe((n) => n >= 300);
    const quietEnd = performance.now() + 2 * SWEEP_EVERY_MS + 1000;
    const quiet = await probe(() => performance.now() >= quietEnd);
    await desk.stop();
    desk = await start();
    // warm, as the desk the export below met before this baseline was measured
    await probe((n) => n >= 300);
    const figures: Figures = {
      size: stored,
      load: loadAverage(),
      p50: quantile(seq, 0.5),
      p99: quantile(seq, 0.99),
      ...restart,
      callsRssGrowthMb,
      sweepP999: quantile(window, 0.999),
      sweepMax: Math.max(...window),
      sweepOver20: window.filter((x) => x > 20).length,
      quietP999: quantile(quiet, 0.999),
      quietMax: Math.max(...quiet),
      quietOver20: quiet.filter((x) => x > 20).length,
      dbBytes: sizeOf(join(dataDir, "desk.db")),
      walBytes,
      ...(await exportWhole()),
    };
    console.log(
      `  at ${figures.size}: clearing p50 ${figures.p50.toFixed(2)} / p99 ${figures.p99.toFixed(2)} ms, start ${figures.listenMs.toFixed(0)} / ${figures.answerMs.toFixed(0)} ms, ` +
        `export ${figures.exportSeconds.toFixed(1)} s +${figures.rssGrowthMb.toFixed(1)} MB, calls meanwhile p99 ${figures.exportP99.toFixed(2)} / max ${figures.exportMax.toFixed(1)} ms (load ${figures.load})`,
    );
    return figures;
  };

  const t0 = performance.now();
  console.log(
    `desk growth benchmark: ${kept === null ? `to ${RECEIPTS}` : `again at ${kept.receipts}`} receipts through real clearings (${FILLERS} clients, ${KEYS} keys) on ${navigator.hardwareConcurrency} cores`,
  );
  const all: Figures[] = [];
  for (const size of kept === null ? SIZES : [kept.receipts]) all.push(await measureAt(size));
  const zero = all[0]!;

  const rows: [string, (f: Figures) => number, (n: number) => string, string][] = [
    ["clearing p50 (ms)", (f) => f.p50, (n) => n.toFixed(3), "within 10 % of 0"],
    ["clearing p99 (ms)", (f) => f.p99, (n) => n.toFixed(3), "within 10 % of 0"],
    ["start-up, listening (ms)", (f) => f.listenMs, (n) => n.toFixed(0), ""],
    ["start-up, first answer (ms)", (f) => f.answerMs, (n) => n.toFixed(0), "<= 150 at 1M"],
    ["start-up CPU, listening (ms)", (f) => f.listenCpuMs, (n) => n.toFixed(0), ""],
    ["start-up CPU, first answer (ms)", (f) => f.answerCpuMs, (n) => n.toFixed(0), ""],
    ["calls over two sweeps p99.9 (ms)", (f) => f.sweepP999, (n) => n.toFixed(2), ""],
    ["calls over two sweeps, longest (ms)", (f) => f.sweepMax, (n) => n.toFixed(2), "no stall > 20"],
    ["  of them over 20 ms", (f) => f.sweepOver20, (n) => n.toFixed(0), ""],
    ["as long with no sweep due p99.9 (ms)", (f) => f.quietP999, (n) => n.toFixed(2), ""],
    ["as long with no sweep due, longest (ms)", (f) => f.quietMax, (n) => n.toFixed(2), ""],
    ["  of them over 20 ms", (f) => f.quietOver20, (n) => n.toFixed(0), "the machine's own"],
    ["ledger file (MB)", (f) => f.dbBytes / 2 ** 20, (n) => n.toFixed(1), ""],
    ["bytes per stored call", (f) => (f.size === 0 ? Number.NaN : f.dbBytes / f.size), (n) => n.toFixed(0), "<= 1,200"],
    ["WAL (MB)", (f) => f.walBytes / 2 ** 20, (n) => n.toFixed(1), "bounded"],
    ["export wall time (s)", (f) => f.exportSeconds, (n) => n.toFixed(2), ""],
    ["export desk CPU per receipt (us)", (f) => f.exportCpuUs, (n) => n.toFixed(1), ""],
    ["export desk RSS before (MB)", (f) => f.rssBeforeMb, (n) => n.toFixed(1), ""],
    ["export desk RSS growth (MB)", (f) => f.rssGrowthMb, (n) => n.toFixed(1), "<= 50 at 1M"],
    ["  over the sequential calls, no export", (f) => f.callsRssGrowthMb, (n) => n.toFixed(1), ""],
    ["calls during export p50 (ms)", (f) => f.exportP50, (n) => n.toFixed(2), ""],
    ["calls during export p99 (ms)", (f) => f.exportP99, (n) => n.toFixed(2), "<= 5"],
    ["calls during export, longest (ms)", (f) => f.exportMax, (n) => n.toFixed(1), ""],
  ];
  const cell = (s: string, w: number) => s.padStart(w);
  console.log("");
  console.log(`${"".padEnd(42)}${all.map((f) => cell(`at ${f.size}`, 14)).join("")}${cell("ratio", 9)}   target`);
  for (const [name, get, fmt, target] of rows) {
    const last = get(all[all.length - 1]!);
    const ratio = last / get(zero);
    console.log(`${name.padEnd(42)}${all.map((f) => cell(fmt(get(f)), 14)).join("")}${cell(Number.isFinite(ratio) ? ratio.toFixed(2) : "-", 9)}   ${target}`);
  }
  console.log(`calls answered other than 200: ${failed}`);
  console.log(`load average at each size: ${all.map((f) => f.load).join(" | ")}; whole run ${((performance.now() - t0) / 60_000).toFixed(1)} min`);
} finally {
  upstream.kill();
  await Promise.all([desk.stop(), upstream.exited]);
  if (KEEP === null) rmSync(base, { recursive: true, force: true });
  else console.log(`the ledger is kept in ${dataDir}`);
}
