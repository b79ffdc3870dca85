// `npm run bench:ask`: the ask side's figures, each against its target.
//  - serve-mcp start to answered initialize + tools/list (median of 20; target <= 80 ms)
//  - pay -> pending through serve-mcp and the approver over mTLS (p50, p99 of 1,000; p50 <= 3 ms)
//  - status (p50 of 1,000; target <= 2 ms)
//  - approver RSS with 50 pending asks
// Uses the compiled binary, real processes and real certificates made for the run.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const binary = resolve(import.meta.dir, "../../dist/ask-only");
const work = mkdtempSync(join(tmpdir(), "ask-only-bench-"));
const certs = join(work, "certs");
const ASKS = Number(process.env.BENCH_ASKS ?? 1000);

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const report = (what: string, value: number, unit: string, target?: number) =>
  console.log(
    `${what.padEnd(44)} ${value.toFixed(unit === "MB" ? 1 : 2).padStart(8)} ${unit}` +
      (target === undefined ? "" : `   target <= ${target} ${unit}   ratio ${(value / target).toFixed(2)}`),
  );

async function startApprover(db: string, maxPending: number) {
  const proc = Bun.spawn(
    [
      binary,
      "approver",
      "--cert",
      join(certs, "approver.pem"),
      "--key",
      join(certs, "approver.key"),
      "--ca",
      join(certs, "client-ca.pem"),
      "--listen",
      "127.0.0.1:0",
      "--db",
      db,
      "--max-pending",
      String(maxPending),
    ],
    { stdin: "pipe", stdout: "pipe", stderr: "pipe" },
  );
  const reader = proc.stderr.getReader();
  let said = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`approver did not start: ${said}`);
    said += new TextDecoder().decode(value);
    const m = /listening on https:\/\/127\.0\.0\.1:(\d+)/.exec(said);
    if (m) {
      // Drain its console so a full pipe never stalls it.
      void (async () => {
        while (!(await reader.read()).done) {}
      })();
      void new Response(proc.stdout).arrayBuffer();
      return { proc, port: Number(m[1]) };
    }
  }
}

const env = (port: number) => ({
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  ASK_ONLY_PAY_URL: `https://localhost:${port}`,
  ASK_ONLY_PAY_CLIENT_CERT: join(certs, "client.pem"),
  ASK_ONLY_PAY_CLIENT_KEY: join(certs, "client.key"),
  ASK_ONLY_PAY_CA: join(certs, "approver-ca.pem"),
});

/** Spawn to the answer of tools/list, writing initialize, initialized and tools/list at once. */
async function startToToolsList(port: number): Promise<number> {
  const started = performance.now();
  const proc = Bun.spawn([binary, "serve-mcp"], { env: env(port), stdin: "pipe", stdout: "pipe", stderr: "ignore" });
  const send = (m: object) => proc.stdin.write(`${JSON.stringify(m)}\n`);
  send({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "0" } },
  });
  send({ jsonrpc: "2.0", method: "notifications/initialized" });
  send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
  proc.stdin.flush();
  const reader = proc.stdout.getReader();
  let out = "";
  while (!out.includes('"id":2')) {
    const { done, value } = await reader.read();
    if (done) throw new Error("serve-mcp closed before tools/list");
    out += new TextDecoder().decode(value);
  }
  const ms = performance.now() - started;
  proc.stdin.end();
  await proc.exited;
  return ms;
}

const PAY = {
  verb: "pay",
  merchant: "Example Shop",
  amount: "19.00",
  currency: "EUR",
  card_handle: "card-2",
  checkout_url: "https://shop.example/checkout/123",
};

try {
  if (Bun.spawnSync([binary, "certs", certs]).exitCode !== 0) throw new Error("certs failed");
  const main = await startApprover(join(work, "asks.db"), ASKS + 100);
  console.log(`ask-only ask-side benchmark (${ASKS} asks; ${new Date().toISOString()})`);

  await startToToolsList(main.port); // warm the page cache
  const starts: number[] = [];
  for (let i = 0; i < 20; i++) starts.push(await startToToolsList(main.port));
  report("serve-mcp start -> tools/list, median of 20", quantile(starts, 0.5), "ms", 80);

  const client = new Client({ name: "bench", version: "0" });
  await client.connect(new StdioClientTransport({ command: binary, args: ["serve-mcp"], env: env(main.port), stderr: "ignore" }));
  const call = (args: object) => client.callTool({ name: "request", arguments: args as Record<string, unknown> });
  for (let i = 0; i < 20; i++) await call(PAY); // warm the connection and the JIT
  const pays: number[] = [];
  const ids: string[] = [];
  for (let i = 0; i < ASKS - 20; i++) {
    const t = performance.now();
    const r = await call(PAY);
    pays.push(performance.now() - t);
    const sc = r.structuredContent as { state?: string; approval_id?: string };
    if (sc.state !== "pending") throw new Error(`pay answered ${JSON.stringify(sc)}`);
    ids.push(sc.approval_id!);
  }
  report(`pay -> pending p50 (${pays.length} asks)`, quantile(pays, 0.5), "ms", 3);
  report(`pay -> pending p99`, quantile(pays, 0.99), "ms");

  const statuses: number[] = [];
  for (const id of ids) {
    const t = performance.now();
    const r = await call({ verb: "status", approval_id: id });
    statuses.push(performance.now() - t);
    if ((r.structuredContent as { state?: string }).state !== "pending") throw new Error("status not pending");
  }
  report(`status p50 (${statuses.length})`, quantile(statuses, 0.5), "ms", 2);
  report(`status p99`, quantile(statuses, 0.99), "ms");
  await client.close();
  main.proc.kill("SIGTERM");
  await main.proc.exited;

  // RSS of a fresh approver holding 50 pending asks.
  const small = await startApprover(join(work, "rss.db"), 50);
  const rssClient = new Client({ name: "bench", version: "0" });
  await rssClient.connect(new StdioClientTransport({ command: binary, args: ["serve-mcp"], env: env(small.port), stderr: "ignore" }));
  for (let i = 0; i < 50; i++) {
    const r = await rssClient.callTool({ name: "request", arguments: PAY });
    if ((r.structuredContent as { state?: string }).state !== "pending") throw new Error("not pending");
  }
  const status = readFileSync(`/proc/${small.proc.pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
  report("approver RSS with 50 pending asks", kb / 1024, "MB");
  await rssClient.close();
  small.proc.kill("SIGTERM");
  await small.proc.exited;
} finally {
  rmSync(work, { recursive: true, force: true });
}
