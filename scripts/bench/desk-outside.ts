// `npm run bench:desk-outside`: the desk's added latency measured the way an outsider would.
// The agent is Node's own fetch (scripts/bench/outside/agent.mjs, run by `node`), the upstream a
// tool server built on the MCP SDK's McpServer with its Streamable HTTP transport, stateless with
// JSON answers (scripts/bench/outside/upstream.mjs, run by `node`); the desk is the compiled
// binary. The baseline is the same client calling the same upstream directly, in the same run.
//   1. sequential: p50 / p99 / p99.9 of direct calls and of calls through the desk (1 KB arguments)
//   2. a fixed rate of 3,000 calls/s over 32 lanes (agentgateway's published set-up), both sides
//   3. refusals (402 / 403 / 404 / 400 mixed), sequential and at the same rate
// Usage: bun build.ts && bun scripts/bench/desk-outside.ts [--calls N] [--rate R] [--seconds S] [--binary PATH]
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { firstLine, quantile, startDesk } from "./lib/measure.ts";

const root = resolve(import.meta.dir, "../..");
const flag = (name: string, fallback: number) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const CALLS = flag("--calls", 2000);
const RATE = flag("--rate", 3000);
const SECONDS = flag("--seconds", 5);
const LANES = 32;
const REFUSAL_SECONDS = Math.min(SECONDS, 2);
const binaryAt = process.argv.indexOf("--binary");
const BINARY = binaryAt > 0 ? resolve(process.argv[binaryAt + 1]!) : join(root, "dist/ask-only");
const TOKEN = "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz";
const NODE = Bun.which("node");
if (NODE === null) throw new Error("bench:desk-outside needs Node.js on PATH (the outsider's client and upstream run on it)");

const row = (what: string, xs: number[]) =>
  `  ${what.padEnd(22)} p50 ${quantile(xs, 0.5).toFixed(3)}  p99 ${quantile(xs, 0.99).toFixed(3)}  p99.9 ${quantile(xs, 0.999).toFixed(3)} ms  (${xs.length} calls)`;
const added = (desk: number[], direct: number[]) =>
  `  ${"added by the desk".padEnd(22)} p50 ${(quantile(desk, 0.5) - quantile(direct, 0.5)).toFixed(3)}  p99 ${(quantile(desk, 0.99) - quantile(direct, 0.99)).toFixed(3)}  p99.9 ${(quantile(desk, 0.999) - quantile(direct, 0.999)).toFixed(3)} ms   ratio p50 ${(quantile(desk, 0.5) / quantile(direct, 0.5)).toFixed(2)}   (target added p50 <= 0.5, p99 <= 2 ms)`;

const upstream = Bun.spawn([NODE, join(import.meta.dir, "outside/upstream.mjs")], { cwd: root, stdout: "pipe", stderr: "inherit" });
const upstreamUrl = await firstLine(upstream.stdout as ReadableStream<Uint8Array>, /(http:\/\/\S+)\n/);
const desk = await startDesk([BINARY], TOKEN);
const deskUrl = desk.url;
const admin = desk.admin;

try {
  await admin("POST", "/admin/upstreams", { name: "out", url: upstreamUrl });
  await admin("PUT", "/admin/tools/out__echo", { price_mc: 1, upstream_cost_mc: 0 });
  await admin("PUT", "/admin/tools/out__shout", { price_mc: 1, upstream_cost_mc: 0 });
  const org = (await admin("POST", "/admin/orgs", { name: "outside" })).org_id as string;
  const newKey = async (budget: number, allow: string[]) =>
    (await admin("POST", "/admin/keys", { org_id: org, budget_mc: budget, reset: "none", allow })).secret as string;
  // One key per lane: a key has at most 20 calls in flight (SPEC 8.3).
  const keys: string[] = [];
  for (let i = 0; i < LANES; i++) keys.push(await newKey(1_000_000_000, ["out__echo"]));
  const SEQUENTIAL_REFUSALS = Math.min(CALLS, 1000);
  const brokeKeys: string[] = [];
  const refusals = SEQUENTIAL_REFUSALS + (RATE > 0 ? RATE * REFUSAL_SECONDS : 0);
  for (let i = 0; i < Math.ceil(refusals / 20) + 1; i++) brokeKeys.push(await newKey(0, ["out__echo"]));

  const plan = {
    upstreamUrl,
    deskUrl,
    tool: "out__echo",
    // priced but on no key's allowlist: a 403
    otherTool: "out__shout",
    keys,
    brokeKeys,
    argBytes: 1000,
    warmCalls: Math.min(300, CALLS),
    sequentialCalls: CALLS,
    sequentialRefusals: SEQUENTIAL_REFUSALS,
    rate: RATE,
    lanes: LANES,
    seconds: SECONDS,
    refusalSeconds: REFUSAL_SECONDS,
  };
  const agent = Bun.spawn([NODE, join(import.meta.dir, "outside/agent.mjs"), JSON.stringify(plan)], { cwd: root, stdout: "pipe", stderr: "inherit" });
  const out = await new Response(agent.stdout).text();
  if ((await agent.exited) !== 0) throw new Error("the outside agent failed");
  const r = JSON.parse(out) as {
    sequential: { direct: number[]; desk: number[]; refusal: number[] };
    rateDirect?: { latencies: number[]; achieved: number };
    rateDesk?: { latencies: number[]; achieved: number };
    rateRefusal?: { latencies: number[]; achieved: number };
  };
  console.log("desk measured from outside: Node's fetch -> desk -> MCP SDK McpServer (stateless, JSON answers), 1 KB arguments");
  console.log(`sequential (${CALLS} calls per side, interleaved)`);
  console.log(row("direct", r.sequential.direct));
  console.log(row("via the desk", r.sequential.desk));
  console.log(added(r.sequential.desk, r.sequential.direct));
  console.log(row("refusal", r.sequential.refusal));
  if (r.rateDirect && r.rateDesk && r.rateRefusal) {
    console.log(`fixed rate ${RATE}/s over ${LANES} lanes for ${SECONDS} s (latency from the time each call was due)`);
    console.log(`${row("direct", r.rateDirect.latencies)}  achieved ${r.rateDirect.achieved.toFixed(0)}/s`);
    console.log(`${row("via the desk", r.rateDesk.latencies)}  achieved ${r.rateDesk.achieved.toFixed(0)}/s`);
    console.log(added(r.rateDesk.latencies, r.rateDirect.latencies));
    console.log(`${row("refusal", r.rateRefusal.latencies)}  achieved ${r.rateRefusal.achieved.toFixed(0)}/s`);
  }
  console.log(`  machine: load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")} on ${navigator.hardwareConcurrency} cores`);
} finally {
  upstream.kill();
  await Promise.all([desk.stop(), upstream.exited]);
}
