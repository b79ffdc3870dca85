// The many-nodes soak: several compiled desk nodes on one embedded PostgreSQL, one key whose
// budget has room for exactly `room` calls, and `callsPerNode` calls per node spread over the
// nodes by `concurrency` agents. It holds when exactly `room` calls were charged and reached the
// upstream, the key spent exactly room × price, every 402 carries a refused_budget receipt, each
// node's key set lists every node's key and verifies the whole export (verify-receipt --jsonl),
// and `desk check` passes on the database. The issue's run: 10,000 calls × 3 nodes on room for
// 137 (`npm run soak:desk-postgres`); test/e2e/postgres-nodes.test.ts runs a small one.
//
//   bun scripts/soak/desk-postgres.ts [--nodes 3] [--calls-per-node 10000] [--room 137] [--concurrency 24]
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startUpstreamFixture } from "../../test/fixtures/upstream-server.ts";
import { runBinary } from "../../test/helpers/binary.ts";
import { adminJson, callTool, DESK_TOKEN, type DeskProcess, startDeskProcess } from "../../test/helpers/desk-process.ts";
import { PostgresServer } from "../../test/helpers/postgres.ts";
import { tempDir } from "../../test/helpers/tmp.ts";

export type SoakOptions = { nodes: number; callsPerNode: number; room: number; concurrency: number; priceMc?: number };

export type SoakSummary = {
  calls: number;
  byOutcome: Record<string, number>;
  upstreamCalls: number;
  spentMc: number;
  /** Nodes that logged migrating the empty database (started together: one). */
  migrators: number;
  seconds: number;
  failures: string[];
};

export async function run(o: SoakOptions, server?: PostgresServer): Promise<SoakSummary> {
  const priceMc = o.priceMc ?? 250;
  const ownServer = server === undefined;
  const pg = server ?? (await PostgresServer.start());
  using tmp = tempDir("soak-pg-");
  const fx = startUpstreamFixture();
  const nodes: DeskProcess[] = [];
  const failures: string[] = [];
  try {
    const { url } = await pg.createDatabase();
    const sealing = randomBytes(32);
    const dirs = Array.from({ length: o.nodes }, (_, i) => {
      const dir = join(tmp.path, `node-${i}`);
      mkdirSync(dir, { mode: 0o700 });
      // The operator copies one sealing key to every node.
      writeFileSync(join(dir, "sealing.key"), sealing, { mode: 0o600 });
      return dir;
    });
    const env = { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: url };
    nodes.push(...(await Promise.all(dirs.map((dir) => startDeskProcess(dir, [], { env })))));
    const migrators = nodes.filter((n) => n.stderr().includes("ledger: schema migrated from version 0 to")).length;

    const first = nodes[0]!;
    await adminJson(first, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
    await adminJson(first, "PUT", "/admin/tools/fx__echo", { price_mc: priceMc, upstream_cost_mc: 0 });
    const org = (await adminJson(first, "POST", "/admin/orgs", { name: "soak" })).org_id as string;
    const secret = (await adminJson(first, "POST", "/admin/keys", { org_id: org, budget_mc: o.room * priceMc, reset: "none", allow: ["fx__echo"] }))
      .secret as string;
    // Every node lists the tool once its catalog check saw the registration (within a second).
    for (const node of nodes) {
      for (;;) {
        const listed = (await (await fetch(`${node.url}/v1/tools`, { headers: { authorization: `Bearer ${secret}` } })).json()) as {
          tools: { name: string }[];
        };
        if (listed.tools.some((t) => t.name === "fx__echo")) break;
        await Bun.sleep(50);
      }
    }

    const total = o.nodes * o.callsPerNode;
    const byOutcome: Record<string, number> = {};
    let next = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        while (next < total) {
          const i = next++;
          const r = await callTool(nodes[i % o.nodes]!.url, secret, "fx__echo", { text: `call ${i}` });
          const outcome = r.headers.get("x-clearing-outcome") ?? `http_${r.status}`;
          byOutcome[outcome] = (byOutcome[outcome] ?? 0) + 1;
          const body = (await r.json()) as { receipt?: { receipt?: { outcome?: string } } };
          if (r.status === 402 && body.receipt?.receipt?.outcome !== "refused_budget") failures.push(`call ${i}: a 402 without a refused_budget receipt`);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;

    const charged = byOutcome.charged ?? 0;
    if (charged !== o.room) failures.push(`charged ${charged} calls, room for ${o.room}`);
    const upstreamCalls = fx.calls.get("echo") ?? 0;
    if (upstreamCalls !== o.room) failures.push(`the upstream saw ${upstreamCalls} calls, room for ${o.room}`);
    const unexpected = Object.keys(byOutcome).filter((k) => !["charged", "refused_budget", "refused_rate_limited"].includes(k));
    if (unexpected.length > 0) failures.push(`unexpected outcomes: ${unexpected.map((k) => `${k} ${byOutcome[k]}`).join(", ")}`);
    const keys = (await (await nodes[o.nodes - 1]!.admin("GET", "/admin/keys")).json()) as { spent_mc: number }[];
    const spentMc = keys[0]?.spent_mc ?? -1;
    if (spentMc !== o.room * priceMc) failures.push(`the key spent ${spentMc} mc, expected ${o.room * priceMc}`);

    const exportFile = join(tmp.path, "export.jsonl");
    writeFileSync(exportFile, await (await first.admin("GET", "/admin/receipts")).text());
    for (const [i, node] of nodes.entries()) {
      const jwks = (await (await fetch(`${node.url}/.well-known/receipt-signing-key.json`)).json()) as { keys: unknown[] };
      if (jwks.keys.length !== o.nodes) failures.push(`node ${i}'s key set lists ${jwks.keys.length} keys, not ${o.nodes}`);
      const jwksFile = join(tmp.path, `jwks-${i}.json`);
      writeFileSync(jwksFile, JSON.stringify(jwks));
      const verified = await runBinary(["verify-receipt", "--jsonl", exportFile, "--keys", jwksFile]);
      if (verified.code !== 0)
        failures.push(`verify-receipt with node ${i}'s key set: exit ${verified.code}: ${verified.stdout.split("\n").slice(-3).join(" ")}`);
    }
    const check = await runBinary(["desk", "check"], { env: { ASK_ONLY_DESK_DATABASE_URL: url } });
    if (check.code !== 0) failures.push(`desk check: exit ${check.code}: ${check.stdout}${check.stderr}`);
    return { calls: total, byOutcome, upstreamCalls, spentMc, migrators, seconds, failures };
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
    await fx.stop();
    if (ownServer) await pg.dispose();
  }
}

export function formatSummary(s: SoakSummary): string {
  const outcomes = Object.entries(s.byOutcome)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  const verdict = s.failures.length === 0 ? "PASS" : `FAIL\n  ${s.failures.join("\n  ")}`;
  return `${s.calls} calls in ${s.seconds.toFixed(1)} s (${(s.calls / s.seconds).toFixed(0)}/s): ${outcomes}; upstream ${s.upstreamCalls}; spent ${s.spentMc} mc\n${verdict}`;
}

if (import.meta.main) {
  const arg = (name: string, fallback: number) => {
    const i = process.argv.indexOf(name);
    return i === -1 ? fallback : Number(process.argv[i + 1]);
  };
  const summary = await run({
    nodes: arg("--nodes", 3),
    callsPerNode: arg("--calls-per-node", 10_000),
    room: arg("--room", 137),
    concurrency: arg("--concurrency", 24),
  });
  console.log(formatSummary(summary));
  process.exit(summary.failures.length === 0 ? 0 : 1);
}
