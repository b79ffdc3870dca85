// The desk's MCP endpoint next to its REST endpoint, one run on this machine: the compiled desk
// (its own process) in front of the fixture upstream, the same paid tool through both.
//   1. latency of one paid call, sequential: p50 / p99 for REST and for /mcp (a raw JSON-RPC POST,
//      as a stateless client sends it)
//   2. paid calls per second at 64 concurrent clients, and the MCP/REST ratio
// Usage: bun build.ts && bun scripts/bench/desk-mcp.ts [--calls N]   (default 2000 per measure)
import { mkdtempSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startUpstreamFixture } from "../../test/fixtures/upstream-server.ts";

const root = resolve(import.meta.dir, "../..");
const CALLS = Number(process.argv[process.argv.indexOf("--calls") + 1]) || 2000;
const CONCURRENCY = 64;
const TOKEN = "bench-mcp-admin-token-0123456789abcdefghijklmnop";

const work = mkdtempSync(join(tmpdir(), "ask-only-bench-mcp-"));
const fx = startUpstreamFixture();
const desk = Bun.spawn([resolve(root, "dist/ask-only"), "desk", "--listen", "127.0.0.1:0", "--data", join(work, "data")], {
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN },
  stdout: "ignore",
  stderr: "pipe",
});
try {
  const reader = (desk.stderr as ReadableStream<Uint8Array>).getReader();
  let said = "";
  let port = 0;
  while (port === 0) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the desk did not start: ${said}`);
    said += new TextDecoder().decode(value);
    port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(said)?.[1] ?? 0);
  }
  reader.releaseLock();
  const url = `http://127.0.0.1:${port}`;
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  await admin("POST", "/admin/upstreams", { name: "fx", url: fx.url });
  await admin("PUT", "/admin/tools/fx__echo", { price_mc: 1, upstream_cost_mc: 0 });
  const org = (await (await admin("POST", "/admin/orgs", { name: "bench" })).json()) as { org_id: string };
  const key = await admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 1_000_000_000, reset: "none", allow: ["fx__echo"] });
  const secret = ((await key.json()) as { secret: string }).secret;

  const rest = async () => {
    const r = await fetch(`${url}/v1/tools/fx__echo`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: '{"text":"hi"}',
    });
    if (r.status !== 200) throw new Error(`REST ${r.status}`);
    await r.arrayBuffer();
  };
  const mcpBody = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fx__echo", arguments: { text: "hi" } } });
  const mcp = async () => {
    const r = await fetch(`${url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${secret}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
      },
      body: mcpBody,
    });
    const text = await r.text();
    if (r.status !== 200 || text.includes('"isError":true')) throw new Error(`MCP ${r.status}`);
  };
  const sequential = async (call: () => Promise<void>) => {
    const times: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const started = performance.now();
      await call();
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    return { p50: times[Math.floor(CALLS / 2)]!, p99: times[Math.floor(CALLS * 0.99)]! };
  };
  const concurrent = async (call: () => Promise<void>) => {
    let left = CALLS * 2;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) await call();
      }),
    );
    return (CALLS * 2) / ((performance.now() - started) / 1000);
  };
  await sequential(rest);
  await sequential(mcp);
  const [r1, m1] = [await sequential(rest), await sequential(mcp)];
  const [r2, m2] = [await concurrent(rest), await concurrent(mcp)];
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  console.log(
    `cpus ${cpus().length}, load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}`,
  );
  console.log(`sequential paid call  REST p50 ${ms(r1.p50)} p99 ${ms(r1.p99)}   MCP p50 ${ms(m1.p50)} p99 ${ms(m1.p99)}`);
  console.log(`${CONCURRENCY} concurrent          REST ${Math.round(r2)}/s   MCP ${Math.round(m2)}/s   ratio ${(m2 / r2).toFixed(2)}`);
} finally {
  desk.kill("SIGTERM");
  await desk.exited;
  await fx.stop();
  rmSync(work, { recursive: true, force: true });
}
