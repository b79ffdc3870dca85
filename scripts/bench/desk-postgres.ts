// The desk on SQLite against the desk on PostgreSQL, in one run on this machine (`bench:desk
// --database`): compiled desk nodes in front of the fixture upstream, `CONCURRENCY` clients over
// 100 keys for a fixed time each, in three set-ups — one node on SQLite (the baseline), one node
// on an embedded PostgreSQL, two nodes on it. For each: clearings per second and the ratio to the
// baseline, the desk processes' CPU per clearing, and PostgreSQL's own CPU per clearing (the
// server and its backends, from /proc). This machine's two cores are shared by the clients, the
// upstream, the nodes and the server, so two nodes cannot show their scaling here; the CPU
// figures are what predict it on a bigger machine (clearings/s per core ≈ 1 / CPU per clearing).
//   bun build.ts && bun scripts/bench/desk-postgres.ts [--seconds 5] [--concurrency 32]
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startUpstreamFixture } from "../../test/fixtures/upstream-server.ts";
import { adminJson, callTool, DESK_TOKEN, type DeskProcess, startDeskProcess } from "../../test/helpers/desk-process.ts";
import { PostgresServer } from "../../test/helpers/postgres.ts";
import { tempDir } from "../../test/helpers/tmp.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const SECONDS = arg("--seconds", 5);
const CONCURRENCY = arg("--concurrency", 32);
const KEYS = 100;

/** CPU seconds (user + system) of a process so far; 0 once it is gone. */
function cpuOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** The postmaster and every process it started, with their CPU so far. */
function treeCpu(root: number): Map<number, number> {
  const out = new Map([[root, cpuOf(root)]]);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
      if (ppid === root) out.set(Number(entry), cpuOf(Number(entry)));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

/** CPU spent by the tree between two snapshots (processes started in between count from 0). */
function treeDelta(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, cpu] of after) total += cpu - (before.get(pid) ?? 0);
  return total;
}

type Figures = { name: string; clearings: number; perSecond: number; deskCpuMs: number; pgCpuMs: number | null };

async function measure(name: string, nodes: DeskProcess[], pg: PostgresServer | null, fxUrl: string): Promise<Figures> {
  const first = nodes[0]!;
  await adminJson(first, "POST", "/admin/upstreams", { name: "fx", url: fxUrl });
  await adminJson(first, "PUT", "/admin/tools/fx__echo", { price_mc: 1, upstream_cost_mc: 0 });
  const org = (await adminJson(first, "POST", "/admin/orgs", { name: "bench" })).org_id as string;
  const secrets: string[] = [];
  for (let i = 0; i < KEYS; i++) {
    secrets.push(
      (await adminJson(first, "POST", "/admin/keys", { org_id: org, budget_mc: 1_000_000_000, reset: "none", allow: ["fx__echo"] })).secret as string,
    );
  }
  for (const node of nodes) {
    for (;;) {
      const r = await callTool(node.url, secrets[0]!, "fx__echo", { text: "warm" });
      if (r.status === 200) break;
      await Bun.sleep(50);
    }
  }
  const load = async (ms: number) => {
    let clearings = 0;
    const until = performance.now() + ms;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, c) => {
        for (let i = c; performance.now() < until; i += CONCURRENCY) {
          const r = await callTool(nodes[i % nodes.length]!.url, secrets[i % KEYS]!, "fx__echo", { text: "bench" });
          await r.arrayBuffer();
          if (r.headers.get("x-clearing-outcome") === "charged") clearings++;
        }
      }),
    );
    return clearings;
  };
  await load(1_000);
  const deskBefore = nodes.map((n) => cpuOf(n.proc.pid));
  const pgBefore = pg?.pid === null || pg === null ? null : treeCpu(pg.pid!);
  const started = performance.now();
  const clearings = await load(SECONDS * 1000);
  const elapsed = (performance.now() - started) / 1000;
  const deskCpu = nodes.reduce((sum, n, i) => sum + cpuOf(n.proc.pid) - deskBefore[i]!, 0);
  const pgCpu = pgBefore === null ? null : treeDelta(pgBefore, treeCpu(pg!.pid!));
  return {
    name,
    clearings,
    perSecond: clearings / elapsed,
    deskCpuMs: (deskCpu * 1000) / clearings,
    pgCpuMs: pgCpu === null ? null : (pgCpu * 1000) / clearings,
  };
}

async function setUp(n: number, url: string | null): Promise<{ nodes: DeskProcess[]; dispose(): Promise<void> }> {
  const tmp = tempDir("bench-pg-");
  const env: Record<string, string> = { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ...(url === null ? {} : { ASK_ONLY_DESK_DATABASE_URL: url }) };
  const first = await startDeskProcess(join(tmp.path, "node-0"), [], { env });
  const nodes = [first];
  for (let i = 1; i < n; i++) {
    const dir = join(tmp.path, `node-${i}`);
    Bun.spawnSync(["mkdir", "-m", "700", dir]);
    Bun.spawnSync(["cp", "-p", join(tmp.path, "node-0", "sealing.key"), dir]);
    nodes.push(await startDeskProcess(dir, [], { env }));
  }
  return {
    nodes,
    async dispose() {
      await Promise.all(nodes.map((node) => node.stop()));
      tmp[Symbol.dispose]();
    },
  };
}

const fx = startUpstreamFixture();
const pg = await PostgresServer.start();
const results: Figures[] = [];
try {
  for (const [name, count, onPg] of [
    ["1 node, SQLite", 1, false],
    ["1 node, PostgreSQL", 1, true],
    ["2 nodes, PostgreSQL", 2, true],
  ] as const) {
    const url = onPg ? (await pg.createDatabase()).url : null;
    const run = await setUp(count, url);
    try {
      results.push(await measure(name, run.nodes, onPg ? pg : null, fx.url));
    } finally {
      await run.dispose();
    }
  }
} finally {
  await fx.stop();
  await pg.dispose();
}

const base = results[0]!.perSecond;
console.log(`desk clearings, ${CONCURRENCY} clients over ${KEYS} keys, ${SECONDS} s each (2 shared cores: clients, upstream, nodes and PostgreSQL together)`);
for (const r of results) {
  const pgText = r.pgCpuMs === null ? "" : `, PostgreSQL ${r.pgCpuMs.toFixed(3)} ms CPU/clearing`;
  console.log(
    `  ${r.name.padEnd(20)} ${r.perSecond.toFixed(0).padStart(6)} clearings/s (x${(r.perSecond / base).toFixed(2)} of SQLite), desk ${r.deskCpuMs.toFixed(3)} ms CPU/clearing${pgText}`,
  );
}
