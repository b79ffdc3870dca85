// Where the desk's CPU goes, stage by stage, in one process: each stage run alone in a loop and
// timed with process.cpuUsage (user + system µs per operation). The upstream fixture runs in its
// own process, so the "upstream call" stage is the desk's client side only.
// Usage: bun scripts/bench/desk-stages.ts
import { join, resolve } from "node:path";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { UpstreamClient } from "../../src/adapters/mcp-upstream/client.ts";
import { NO_CREDENTIAL } from "../../src/core/upstream/credential.ts";
import { mcpConnector } from "../../src/adapters/mcp-upstream/connector.ts";
import { restConnector } from "../../src/adapters/rest-upstream/connector.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { createHandler } from "../../src/commands/desk/http.ts";
import { Desk } from "../../src/core/desk/desk.ts";
import { hourOf, periodOf } from "../../src/core/desk/period.ts";
import { importSealingKey } from "../../src/core/desk/seal.ts";
import { lookupOf, sha256 } from "../../src/core/desk/secrets.ts";
import { generateSigningKey, loadSigner, paramsSha256 } from "../../src/core/receipt/index.ts";
import { firstLine } from "./lib/measure.ts";

const root = resolve(import.meta.dir, "../..");
const TOKEN = "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz";

const rows: [string, number][] = [];
async function stage(name: string, n: number, op: (i: number) => unknown, concurrency = 1): Promise<void> {
  for (let i = 0; i < Math.min(200, n); i++) await op(i);
  const c0 = process.cpuUsage();
  if (concurrency === 1) for (let i = 0; i < n; i++) await op(i);
  else {
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < n) await op(next++);
      }),
    );
  }
  const c = process.cpuUsage(c0);
  rows.push([name, (c.user + c.system) / n]);
}

const upstream = Bun.spawn([process.execPath, join(root, "test/fixtures/upstream-server.ts")], { stdout: "pipe", stderr: "inherit" });
const upstreamUrl = await firstLine(upstream.stdout as ReadableStream<Uint8Array>, /(http:\/\/\S+)\n/);
const dir = mkdtempSync(join(tmpdir(), "desk-stages-"));
const ledger = new SqliteDeskLedger(join(dir, "desk.db"), { backgroundCheckpointMs: 200 });
const desk = await Desk.open({
  ledger,
  connectors: { mcp: mcpConnector, rest: restConnector },
  openCredential,
  signer: loadSigner(generateSigningKey().privatePem),
  sealingKey: await importSealingKey(new Uint8Array(32)),
});
const handler = createHandler(desk, { adminTokenSha256: sha256(TOKEN) });
const admin = async (method: string, path: string, body?: unknown) =>
  (
    await handler(
      new Request(`http://d${path}`, { method, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body: JSON.stringify(body) }),
    )
  ).json() as Promise<Record<string, unknown>>;
try {
  await admin("POST", "/admin/upstreams", { name: "fx", url: upstreamUrl });
  await admin("PUT", "/admin/tools/fx__echo", { price_mc: 1, upstream_cost_mc: 0 });
  const org = (await admin("POST", "/admin/orgs", { name: "b" })).org_id as string;
  const secrets: string[] = [];
  for (let i = 0; i < 100; i++)
    secrets.push((await admin("POST", "/admin/keys", { org_id: org, budget_mc: 1e12, reset: "none", allow: ["fx__echo"] })).secret as string);
  const args = { text: "a typical short argument for a paid tool" };
  const body = JSON.stringify(args);
  const N = 3000;
  const keys = await Promise.all(secrets.map(async (s) => (await ledger.keys.find(lookupOf(s)!, sha256(s)))!));
  const key = keys[0]!;
  // Round-robin over the 100 keys: each key may have 20 calls in flight (the failure limit).
  const ctx = (i: number) => ({
    key: keys[i % 100]!,
    tool: "fx__echo",
    priceMc: 1,
    upstreamCostMc: 0,
    paramsSha256: "0".repeat(64),
    now: Date.now(),
    hour: hourOf(Date.now()),
    period: periodOf("none", Date.now()),
  });
  const tool = desk.tool("fx__echo")!;

  await stage("sha256(secret) + keys.find (SELECT by lookup, the row read as a key)", N, (i) =>
    ledger.keys.find(lookupOf(secrets[i % 100]!)!, sha256(secrets[i % 100]!)),
  );
  await stage("ajv check of the arguments", N, () => tool.check(args));
  await stage("paramsSha256 (canonical JSON + sha256)", N, () => paramsSha256(args));
  await stage("receipt make (sign + sha256 + stringify)", N, () =>
    desk.receiptMaker().make({
      receiptId: "rcpt_0123456789abcdef",
      link: { seq: 2, prevSha256: "2".repeat(64) },
      keyId: key.id,
      orgId: key.orgId,
      tool: "fx__echo",
      outcome: "charged",
      httpStatus: 200,
      priceMc: 1,
      amountMc: 1,
      upstreamCostMc: 0,
      remainingMc: 5,
      period: "none",
      paramsSha256: "0".repeat(64),
      resultSha256: "1".repeat(64),
      issuedAt: Date.now(),
    }),
  );
  const reserveAndSettle = async (i: number) => {
    const r = await ledger.money.reserve(ctx(i), desk.receiptMaker().make);
    if (r.kind !== "reserved") throw new Error(r.kind);
    return ledger.money.settle({ reservationId: r.reservationId, outcome: "charged", resultSha256: "1".repeat(64), now: Date.now() }, desk.receiptMaker().make);
  };
  await stage("money.reserve + settle, sequential (a commit each)", N, reserveAndSettle);
  await stage("money.reserve + settle, 64 concurrent (group commits)", N, reserveAndSettle, 64);
  const client = new UpstreamClient("fx", new URL(upstreamUrl), NO_CREDENTIAL, 30_000);
  await stage("upstream client call, sequential", N, () => client.call("echo", args));
  await stage("upstream client call, 64 concurrent", N, () => client.call("echo", args), 64);
  await client.close();
  await stage("desk.clear() whole (in-process, no HTTP), 64 concurrent", N, (i) => desk.clear(secrets[i % 100]!, "fx__echo", args), 64);
  await stage(
    "handler(Request) whole, 64 concurrent",
    N,
    async (i) => {
      const r = await handler(
        new Request("http://d/v1/tools/fx__echo", {
          method: "POST",
          headers: { authorization: `Bearer ${secrets[i % 100]}`, "content-type": "application/json" },
          body,
        }),
      );
      await r.arrayBuffer();
    },
    64,
  );
  const broke: string[] = [];
  for (let i = 0; i < 1000; i++)
    broke.push((await admin("POST", "/admin/keys", { org_id: org, budget_mc: 0, reset: "none", allow: ["fx__echo"] })).secret as string);
  const kinds: [string, string, string][] = [
    ["402", "fx__echo", body],
    ["403", "fx__add", JSON.stringify({ a: 1, b: 2 })],
    ["404", "fx__nope", "{}"],
    ["400", "fx__echo", JSON.stringify({ text: 1 })],
  ];
  let used = 0;
  for (const [status, tool, payload] of kinds) {
    await stage(
      `handler(Request) refusal ${status}, 64 concurrent`,
      4000,
      async () => {
        const k = broke[Math.floor(used++ / 19) % 1000]!;
        const r = await handler(
          new Request(`http://d/v1/tools/${tool}`, {
            method: "POST",
            headers: { authorization: `Bearer ${k}`, "content-type": "application/json" },
            body: payload,
          }),
        );
        await r.arrayBuffer();
        if (String(r.status) !== status) throw new Error(`${status}: got ${r.status}`);
      },
      64,
    );
  }
  const nop = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json({ ok: true }) });
  await stage(
    "HTTP client fetch to a no-op Bun.serve (both sides, this process)",
    N,
    async () => {
      const r = await fetch(`http://127.0.0.1:${nop.port}/`, { method: "POST", body, headers: { "content-type": "application/json" } });
      await r.arrayBuffer();
    },
    64,
  );
  nop.stop(true);
  const direct = new UpstreamClient("fx", new URL(upstreamUrl), NO_CREDENTIAL, 30_000);
  await stage("a second UpstreamClient, 64 concurrent", N, () => direct.call("echo", args), 64);
  await direct.close();
  for (const [name, us] of rows) console.log(`${us.toFixed(1).padStart(8)} µs  ${name}`);
} finally {
  await desk.close();
  await ledger.close();
  upstream.kill();
  await upstream.exited;
  rmSync(dir, { recursive: true, force: true });
}
