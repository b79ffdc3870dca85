// Several compiled desk processes on one PostgreSQL (embedded, real): they start together on an
// empty database and migrate once, take one key's calls across nodes with the budget exact to
// the millicent, append one receipt chain that verify-receipt accepts with the key set fetched
// from any node, share catalog changes within a second, refuse a node holding another sealing
// key, and fail closed (503 LEDGER_UNAVAILABLE, no upstream call, no charge) while the database
// is down, recovering by themselves when it returns.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { adminJson, callTool, DESK_TOKEN, type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { tempDir } from "../helpers/tmp.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { randomBytes } from "node:crypto";
import { formatSummary, run } from "../../scripts/soak/desk-postgres.ts";

setDefaultTimeout(60_000);

const pg = usePostgres();
let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(async () => {
  await fx.stop();
});

type Cluster = { nodes: DeskProcess[]; url: string; dirs: string[]; [Symbol.asyncDispose](): Promise<void> };

/** Data directories holding one sealing key (the operator copies it), and `n` nodes started at the same moment. */
async function cluster(n: number, extraArgs: string[] = []): Promise<Cluster> {
  const tmp = tempDir("pg-nodes-");
  const { url } = await pg.server.createDatabase();
  const sealing = randomBytes(32);
  const dirs = Array.from({ length: n }, (_, i) => {
    const dir = join(tmp.path, `node-${i}`);
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, "sealing.key"), sealing, { mode: 0o600 });
    return dir;
  });
  const env = { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: url };
  const started = await Promise.allSettled(dirs.map((dir) => startDeskProcess(dir, extraArgs, { env })));
  const nodes = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const dispose = async () => {
    await Promise.all(nodes.map((node) => node.stop()));
    tmp[Symbol.dispose]();
  };
  if (nodes.length !== n) {
    await dispose();
    throw new Error(`not every node started: ${started.map((s) => (s.status === "rejected" ? String(s.reason) : "ok")).join("; ")}`);
  }
  return { nodes, url, dirs, [Symbol.asyncDispose]: dispose };
}

async function setUp(node: DeskProcess, budgetMc: number, priceMc: number): Promise<string> {
  await adminJson(node, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
  await adminJson(node, "PUT", "/admin/tools/fx__echo", { price_mc: priceMc, upstream_cost_mc: 0 });
  await adminJson(node, "PUT", "/admin/tools/fx__hang", { price_mc: 700, upstream_cost_mc: 0 });
  const org = (await adminJson(node, "POST", "/admin/orgs", { name: "many" })).org_id as string;
  const key = await adminJson(node, "POST", "/admin/keys", { org_id: org, budget_mc: budgetMc, reset: "none", allow: ["fx__echo", "fx__hang"] });
  return key.secret as string;
}

const spentOf = async (node: DeskProcess) => ((await (await node.admin("GET", "/admin/keys")).json()) as { spent_mc: number }[]).map((k) => k.spent_mc);

/** Resolves once every node lists the tool (catalog changes reach the others within a second). */
async function untilListed(nodes: DeskProcess[], secret: string, tool: string): Promise<void> {
  for (const node of nodes) {
    for (;;) {
      const r = await fetch(`${node.url}/v1/tools`, { headers: { authorization: `Bearer ${secret}` } });
      const body = (await r.json()) as { tools?: { name: string }[] };
      if (body.tools?.some((t) => t.name === tool)) break;
      await Bun.sleep(50);
    }
  }
}

async function checkDatabase(url: string): Promise<void> {
  const check = await runBinary(["desk", "check"], { env: { ASK_ONLY_DESK_DATABASE_URL: url } });
  expect(check.stderr).toBe("");
  expect(check.code).toBe(0);
}

describe("three desk nodes on one PostgreSQL (binary)", () => {
  test("400 calls over three nodes started together on an empty database, room for 37: exactly 37 charged, one chain, verified with any node's key set", async () => {
    // The soak (scripts/soak/desk-postgres.ts) in small: it migrates once, charges exactly the
    // room and calls the upstream as often, and every check of the long run holds.
    const summary = await run({ nodes: 3, callsPerNode: 134, room: 37, concurrency: 8 }, pg.server);
    expect(summary.failures, formatSummary(summary)).toEqual([]);
    expect(summary.migrators).toBe(1);
    expect(summary.byOutcome.charged).toBe(37);
    expect(summary.byOutcome.refused_budget).toBeGreaterThan(0);
    expect(summary.calls).toBe(402);
  });

  test("a node with another sealing key refuses to start, naming the file; a price set on one node applies on the others", async () => {
    await using c = await cluster(2);
    const secret = await setUp(c.nodes[0]!, 10_000, 100);
    await untilListed(c.nodes, secret, "fx__echo");
    await adminJson(c.nodes[1]!, "PUT", "/admin/tools/fx__echo", { price_mc: 300, upstream_cost_mc: 0 });
    // Within a second (the catalog check) node 0 charges the new price.
    for (;;) {
      const r = await callTool(c.nodes[0]!.url, secret, "fx__echo", { text: "price" });
      const receipt = ((await r.json()) as { receipt: { receipt: { amount_mc: number } } }).receipt.receipt;
      if (receipt.amount_mc === 300) break;
      expect(receipt.amount_mc).toBe(100);
      await Bun.sleep(100);
    }
    await using other = tempDir();
    const dir = join(other.path, "stranger");
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, "sealing.key"), randomBytes(32), { mode: 0o600 });
    const refused = Bun.spawn([join(import.meta.dir, "../../dist/ask-only"), "desk", "--listen", "127.0.0.1:0", "--data", dir], {
      env: { PATH: process.env.PATH ?? "/usr/bin", ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: c.url },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stderr] = await Promise.all([refused.exited, new Response(refused.stderr).text()]);
    expect(code).toBe(1);
    expect(stderr).toContain(`ask-only: error: ${join(dir, "sealing.key")} is not the sealing key of the desks on this database`);
  });

  test("PostgreSQL stopped: 503 LEDGER_UNAVAILABLE, /healthz 503, no upstream call, nothing charged; restarted: calls succeed by themselves", async () => {
    await using c = await cluster(2);
    const secret = await setUp(c.nodes[0]!, 10_000, 100);
    await untilListed(c.nodes, secret, "fx__echo");
    for (const node of c.nodes) expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
    expect((await callTool(c.nodes[1]!.url, secret, "fx__echo", { text: "before" })).status).toBe(200);
    const upstreamBefore = fx.totalCalls();
    await pg.server.stop();
    try {
      for (const node of c.nodes) {
        const r = await callTool(node.url, secret, "fx__echo", { text: "down" });
        expect(r.status).toBe(503);
        expect(((await r.json()) as { error: string }).error).toBe("LEDGER_UNAVAILABLE");
        expect((await fetch(`${node.url}/healthz`)).status).toBe(503);
        const admin = await node.admin("GET", "/admin/keys");
        expect([admin.status, await admin.json()]).toEqual([503, { error: "LEDGER_UNAVAILABLE" }]);
      }
      expect(fx.totalCalls()).toBe(upstreamBefore);
    } finally {
      await pg.server.start();
    }
    for (const node of c.nodes) {
      for (;;) {
        const r = await callTool(node.url, secret, "fx__echo", { text: "after" });
        if (r.status === 200) break;
        expect(r.status).toBe(503);
        await Bun.sleep(100);
      }
      expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
    }
    expect(await spentOf(c.nodes[0]!)).toEqual([300]);
    await checkDatabase(c.url);
  });

  test("kill -9 of a node mid-call: after its lease runs out a live node refunds its call, once; every receipt a client got is in the export", async () => {
    await using c = await cluster(2, ["--node-lease", "3"]);
    const secret = await setUp(c.nodes[0]!, 10_000, 100);
    await untilListed(c.nodes, secret, "fx__hang");
    const received: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await callTool(c.nodes[i % 2]!.url, secret, "fx__echo", { text: `call ${i}` });
      received.push(((await r.json()) as { receipt: { receipt: { id: string } } }).receipt.receipt.id);
    }
    const hangingBefore = fx.hanging();
    const inFlight = callTool(c.nodes[1]!.url, secret, "fx__hang", {}).catch(() => null);
    await fx.whenHanging(hangingBefore + 1);
    expect(await spentOf(c.nodes[0]!)).toEqual([600 + 700]);
    await c.nodes[1]!.kill();
    expect(await inFlight).toBeNull();
    fx.release();
    // The live node refunds it within a second of the lease running out (3 s by the database's clock).
    while ((await spentOf(c.nodes[0]!))[0] !== 600) await Bun.sleep(100);
    // The killed node restarts on its data directory: its own start-up sweep finds nothing left to refund.
    c.nodes[1] = await startDeskProcess(c.dirs[1]!, ["--node-lease", "3"], {
      env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: c.url },
    });
    const exported = (await (await c.nodes[1]!.admin("GET", "/admin/receipts")).text())
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { receipt: { id: string; outcome: string } }).receipt);
    expect(exported.filter((r) => r.outcome === "refunded_abandoned")).toHaveLength(1);
    expect(received.filter((id) => !exported.some((r) => r.id === id))).toEqual([]);
    expect(await spentOf(c.nodes[1]!)).toEqual([600]);
    await checkDatabase(c.url);
  });

  test("PostgreSQL stopped mid-load: answers are 200 or 503, and once it is back nothing is left open, every paid answer is in the export, desk check passes", async () => {
    await using c = await cluster(2, ["--upstream-timeout", "1"]);
    const secret = await setUp(c.nodes[0]!, 100_000_000, 100);
    await untilListed(c.nodes, secret, "fx__echo");
    const answers: { status: number; body: { error?: string; receipt?: { receipt: { id: string } } } }[] = [];
    let stop = false;
    let afterRestart = 0;
    let restarted = false;
    const agents = Array.from({ length: 6 }, async (_, a) => {
      for (let i = a; !stop; i += 6) {
        const r = await callTool(c.nodes[i % 2]!.url, secret, "fx__echo", { text: `load ${i}` });
        answers.push({ status: r.status, body: (await r.json()) as never });
        if (restarted && r.status === 200) afterRestart++;
        if (afterRestart >= 20) stop = true;
      }
    });
    while (answers.filter((x) => x.status === 200).length < 30) await Bun.sleep(20);
    await pg.server.stop("immediate");
    const downAt = answers.length;
    while (answers.length < downAt + 20) await Bun.sleep(20);
    await pg.server.start();
    restarted = true;
    await Promise.all(agents);
    expect(answers.filter((x) => x.status !== 200 && !(x.status === 503 && x.body.error === "LEDGER_UNAVAILABLE"))).toEqual([]);
    expect(answers.some((x) => x.status === 503)).toBe(true);
    // A reservation whose answer was lost with the database is swept as abandoned (1 s + 10 s).
    const sql = openPool(parseDatabaseUrl(c.url), { max: 1 });
    try {
      for (;;) {
        const [row] = await sql`SELECT count(*)::int AS n FROM reservations WHERE state = 'open'`;
        if (row.n === 0) break;
        await Bun.sleep(200);
      }
    } finally {
      await sql.close();
    }
    const exported = (await (await c.nodes[1]!.admin("GET", "/admin/receipts")).text())
      .trim()
      .split("\n")
      .map((line) => (JSON.parse(line) as { receipt: { id: string; outcome: string; amount_mc: number } }).receipt);
    const paid = answers.filter((x) => x.status === 200).map((x) => x.body.receipt!.receipt.id);
    expect(paid.filter((id) => !exported.some((r) => r.id === id && r.outcome === "charged"))).toEqual([]);
    const charged = exported.filter((r) => r.outcome === "charged");
    expect(charged.length).toBeGreaterThanOrEqual(paid.length);
    expect(await spentOf(c.nodes[0]!)).toEqual([charged.reduce((sum, r) => sum + r.amount_mc, 0)]);
    await checkDatabase(c.url);
  }, 90_000);

  test("a copied data directory cannot pass for a second node: its node id is held, or its signing key is another node's", async () => {
    await using c = await cluster(1, ["--node-lease", "3"]);
    await using tmp = tempDir();
    const start = async (dir: string) => {
      const proc = Bun.spawn([join(import.meta.dir, "../../dist/ask-only"), "desk", "--listen", "127.0.0.1:0", "--data", dir, "--node-lease", "3"], {
        env: { PATH: process.env.PATH ?? "/usr/bin", ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: c.url },
        stdout: "pipe",
        stderr: "pipe",
      });
      const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
      return { code, stderr };
    };
    const whole = join(tmp.path, "whole-copy");
    Bun.spawnSync(["cp", "-a", c.dirs[0]!, whole]);
    Bun.spawnSync(["rm", "-f", join(whole, "desk.lock")]);
    // It waits out one lease (a restart of a killed node would find it run out), then refuses.
    const held = await start(whole);
    expect(held.code).toBe(1);
    expect(held.stderr).toContain("is held by another running desk (its lease keeps being renewed)");
    const keyOnly = join(tmp.path, "key-copy");
    mkdirSync(keyOnly, { mode: 0o700 });
    for (const f of ["sealing.key", "receipt-signing.key"]) Bun.spawnSync(["cp", "-p", join(c.dirs[0]!, f), keyOnly]);
    const taken = await start(keyOnly);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toContain(`ask-only: error: ${join(keyOnly, "receipt-signing.key")}: the receipt-signing key`);
    expect(taken.stderr).toContain("is registered to node node_");
    // The running node never stopped serving.
    expect((await fetch(`${c.nodes[0]!.url}/healthz`)).status).toBe(200);
  });
});
