// `npm run bench:desk-export`: what exporting the receipts costs the desk while it serves calls.
// Fills a ledger through real clearings (the compiled desk before the fixture upstream, each its
// own process), then exports every receipt with a client that reads slowly, while another client
// keeps clearing calls. Prints the desk's RSS before and at most during the export, and the p50 /
// p99 of the concurrent calls during the export against the same calls just before it (a ratio).
// With --database, the desk's ledger is an embedded PostgreSQL (started for the run, its own
// processes), not SQLite.
// Usage: bun build.ts && bun scripts/bench/desk-export.ts [--receipts N] [--binary PATH] [--database]
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { PostgresServer } from "../../test/helpers/postgres.ts";
import { firstLine, quantile, startDesk } from "./lib/measure.ts";

const root = resolve(import.meta.dir, "../..");
const at = (name: string) => process.argv.indexOf(name);
const RECEIPTS = at("--receipts") > 0 ? Number(process.argv[at("--receipts") + 1]) : 50_000;
const BINARY = at("--binary") > 0 ? resolve(process.argv[at("--binary") + 1]!) : join(root, "dist/ask-only");
const TOKEN = "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz";

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

const upstream = Bun.spawn([process.execPath, join(root, "test/fixtures/upstream-server.ts")], { stdout: "pipe", stderr: "inherit" });
const upstreamUrl = await firstLine(upstream.stdout as ReadableStream<Uint8Array>, /(http:\/\/\S+)\n/);
const pg = process.argv.includes("--database") ? await PostgresServer.start() : null;
const database: Record<string, string> = pg === null ? {} : { ASK_ONLY_DESK_DATABASE_URL: (await pg.createDatabase()).url };
const desk = await startDesk([BINARY], TOKEN, { env: database });
const deskUrl = desk.url;
const admin = desk.admin;

try {
  await admin("POST", "/admin/upstreams", { name: "fx", url: upstreamUrl });
  await admin("PUT", "/admin/tools/fx__echo", { price_mc: 1, upstream_cost_mc: 0 });
  const org = (await admin("POST", "/admin/orgs", { name: "bench" })).org_id as string;
  const keys: string[] = [];
  for (let i = 0; i < 33; i++) {
    keys.push((await admin("POST", "/admin/keys", { org_id: org, budget_mc: 1_000_000_000, reset: "none", allow: ["fx__echo"] })).secret as string);
  }
  const call = async (key: string) => {
    const r = await fetch(`${deskUrl}/v1/tools/fx__echo`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: '{"text":"a typical short argument for a paid tool"}',
    });
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`call: ${r.status}`);
  };
  let filled = 0;
  const t0 = performance.now();
  await Promise.all(
    keys.slice(0, 32).map(async (key) => {
      while (filled < RECEIPTS) {
        filled++;
        await call(key);
      }
    }),
  );
  const fillSeconds = (performance.now() - t0) / 1000;

  // The probe: sequential calls on their own key, before and during the export.
  const probe = async (until: () => boolean) => {
    const xs: number[] = [];
    do {
      const t = performance.now();
      await call(keys[32]!);
      xs.push(performance.now() - t);
    } while (!until());
    return xs;
  };
  let n = 0;
  const before = await probe(() => ++n >= 500);
  const rssBefore = rssMb(desk.proc.pid);
  let exporting = true;
  let peak = rssBefore;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMb(desk.proc.pid));
  }, 20);
  const exportStart = performance.now();
  const exported = (async () => {
    const r = await fetch(`${deskUrl}/admin/receipts`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const reader = r.body!.getReader();
    let lines = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      // counted natively: the probe shares this process's event loop
      for (let i = value.indexOf(10); i !== -1; i = value.indexOf(10, i + 1)) lines++;
      // a slow reader: the export must wait for it, not pile up in the desk
      await Bun.sleep(1);
    }
    exporting = false;
    return lines;
  })();
  const during = await probe(() => !exporting);
  const lines = await exported;
  const exportSeconds = (performance.now() - exportStart) / 1000;
  clearInterval(sampler);
  console.log(
    `desk export benchmark (${pg === null ? "SQLite" : "PostgreSQL"}): ${RECEIPTS} receipts filled through real clearings in ${fillSeconds.toFixed(1)} s`,
  );
  console.log(`  export            ${lines} lines in ${exportSeconds.toFixed(1)} s (a reader that pauses 1 ms per chunk)`);
  console.log(
    `  desk RSS          ${rssBefore.toFixed(1)} MB before, ${peak.toFixed(1)} MB at most during: +${(peak - rssBefore).toFixed(1)} MB   (target <= +50 MB at 1M)`,
  );
  console.log(
    `  calls meanwhile   p50 ${quantile(during, 0.5).toFixed(2)} ms, p99 ${quantile(during, 0.99).toFixed(2)} ms over ${during.length} calls; just before: p50 ${quantile(before, 0.5).toFixed(2)}, p99 ${quantile(before, 0.99).toFixed(2)} ms   ratio p99 ${(quantile(during, 0.99) / quantile(before, 0.99)).toFixed(2)}`,
  );
  console.log(
    `  machine           load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")} on ${navigator.hardwareConcurrency} cores`,
  );
  // every receipt stored before the export began: the fill and the probe's calls before it
  if (lines < RECEIPTS + before.length) throw new Error(`exported ${lines} lines, expected at least ${RECEIPTS + before.length}`);
} finally {
  upstream.kill();
  await Promise.all([desk.stop(), upstream.exited]);
  await pg?.dispose();
}
