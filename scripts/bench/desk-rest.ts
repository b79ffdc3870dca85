// What the desk adds to a REST tool call, one run on this machine: the compiled desk (its own
// process) in front of the REST fixture (its own process, described by its own OpenAPI
// document), against direct calls to the same fixture endpoint, both made with the same client
// (this process's fetch, reused connections), sequential:
//   p50 / p99 of each side, the added latency (desk − direct) and the ratio desk / direct.
// Usage: bun build.ts && bun scripts/bench/desk-rest.ts [--calls N]   (sequential calls per side, default 2000)
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { REST_DOCUMENT } from "../../test/fixtures/rest-server.ts";
import { firstLine, quantile } from "./lib/measure.ts";

const root = resolve(import.meta.dir, "../..");
const CALLS = Number(process.argv[process.argv.indexOf("--calls") + 1]) || 2000;
const TOKEN = "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz";

async function sequential(call: () => Promise<void>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < 200; i++) await call();
  const times: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    await call();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { p50: quantile(times, 0.5), p99: quantile(times, 0.99) };
}

const fixture = Bun.spawn([process.execPath, join(root, "scripts/bench/rest-fixture-process.ts")], { stdout: "pipe", stderr: "inherit" });
const fixtureUrl = await firstLine(fixture.stdout as ReadableStream<Uint8Array>, /(http:\/\/\S+)\n/);
const data = mkdtempSync(join(tmpdir(), "desk-rest-bench-"));
const desk = Bun.spawn([join(root, "dist/ask-only"), "desk", "--listen", "127.0.0.1:0", "--data", join(data, "d")], {
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN, NO_COLOR: "1", TZ: "Etc/UTC" },
  stdout: "ignore",
  stderr: "pipe",
});
try {
  const deskUrl = await firstLine(desk.stderr as ReadableStream<Uint8Array>, /desk listening on (http:\/\/\S+)\n/);
  const admin = async (method: string, path: string, body: unknown) => {
    const r = await fetch(`${deskUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, unknown>;
  };
  await admin("POST", "/admin/upstreams", { name: "fx", base_url: fixtureUrl, openapi: REST_DOCUMENT });
  await admin("PUT", "/admin/tools/fx__getItem", { price_mc: 1, upstream_cost_mc: 0 });
  const org = (await admin("POST", "/admin/orgs", { name: "bench" })).org_id as string;
  const secret = (await admin("POST", "/admin/keys", { org_id: org, budget_mc: 1_000_000_000, reset: "none", allow: ["fx__getItem"] })).secret as string;

  const body = JSON.stringify({ id: "42" });
  const viaDesk = async () => {
    const r = await fetch(`${deskUrl}/v1/tools/fx__getItem`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body,
    });
    if (r.status !== 200) throw new Error(`desk ${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  };
  const direct = async () => {
    const r = await fetch(`${fixtureUrl}/items/42`, { headers: { accept: "application/json" } });
    if (r.status !== 200) throw new Error(`direct ${r.status}`);
    await r.arrayBuffer();
  };

  console.log(`desk REST clearing vs direct REST call, ${CALLS} sequential calls each, ${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)}`);
  const d = await sequential(direct);
  const v = await sequential(viaDesk);
  const f = (ms: number) => `${ms.toFixed(3)} ms`;
  console.log(`direct GET /items/42        p50 ${f(d.p50)}  p99 ${f(d.p99)}`);
  console.log(`desk POST /v1/tools/…       p50 ${f(v.p50)}  p99 ${f(v.p99)}`);
  console.log(`added by the desk           p50 ${f(v.p50 - d.p50)}  p99 ${f(v.p99 - d.p99)}`);
  console.log(`ratio desk / direct         p50 ${(v.p50 / d.p50).toFixed(2)}  p99 ${(v.p99 / d.p99).toFixed(2)}`);
} finally {
  desk.kill();
  fixture.kill();
  await Promise.all([desk.exited, fixture.exited]);
  rmSync(data, { recursive: true, force: true });
}
