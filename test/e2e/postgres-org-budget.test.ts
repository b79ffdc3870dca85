// An organization's budget on two compiled desk nodes sharing one PostgreSQL (embedded, real):
// the keys of one org, called through both nodes at once, are charged exactly what the org's
// budget holds, to the millicent; a top-up sent to both nodes at once counts once; both nodes
// report the same org spend, the upstream is called exactly as often as charged, and
// `desk check` finds the ledger sound (the org totals included).
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { adminJson, callTool, DESK_TOKEN, type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { tempDir } from "../helpers/tmp.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";

setDefaultTimeout(60_000);

const pg = usePostgres();
let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(async () => {
  await fx.stop();
});

const PRICE = 1_000;

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

/** `perWorker` calls by each (node, key) pair, four workers at a time per pair; the statuses. */
async function load(nodes: DeskProcess[], secrets: string[], perWorker: number): Promise<number[]> {
  const workers = nodes.flatMap((node) =>
    secrets.flatMap((secret) =>
      Array.from({ length: 4 }, async () => {
        const statuses: number[] = [];
        for (let i = 0; i < perWorker; i++) {
          const r = await callTool(node.url, secret, "fx__echo", { text: String(i) });
          await r.arrayBuffer();
          statuses.push(r.status);
        }
        return statuses;
      }),
    ),
  );
  return (await Promise.all(workers)).flat();
}

describe("an org budget on two desk nodes sharing one PostgreSQL (binary)", () => {
  test("two keys on two nodes at once: exactly the org's budget is charged, a top-up sent to both counts once, desk check passes", async () => {
    await using tmp = tempDir("pg-org-");
    const { url } = await pg.server.createDatabase();
    const sealing = randomBytes(32);
    const env = { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: url };
    const nodes: DeskProcess[] = [];
    try {
      for (const name of ["node-0", "node-1"]) {
        const dir = join(tmp.path, name);
        mkdirSync(dir, { mode: 0o700 });
        writeFileSync(join(dir, "sealing.key"), sealing, { mode: 0o600 });
        nodes.push(await startDeskProcess(dir, [], { env }));
      }
      const [a, b] = nodes as [DeskProcess, DeskProcess];
      await adminJson(a, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
      await adminJson(a, "PUT", "/admin/tools/fx__echo", { price_mc: PRICE, upstream_cost_mc: 0 });
      const orgId = (await adminJson(a, "POST", "/admin/orgs", { name: "shared" })).org_id as string;
      // Two keys, one made on each node; each refusal counts against a key's hourly failure
      // limit, so the load after the top-up runs on two fresh keys of the same org.
      const twoKeys = () =>
        Promise.all(
          [a, b].map(
            async (node) =>
              (await adminJson(node, "POST", "/admin/keys", { org_id: orgId, budget_mc: 1_000_000, reset: "none", allow: ["fx__echo"] })).secret as string,
          ),
        );
      const secrets = await twoKeys();
      // Room for 23 calls and 999 mc: the 24th does not fit by one millicent.
      await adminJson(b, "PATCH", `/admin/orgs/${orgId}`, { budget_mc: 23 * PRICE + PRICE - 1, reset: "monthly" });
      await untilListed(nodes, secrets[0]!, "fx__echo");
      const before = fx.calls.get("echo") ?? 0;

      const first = await load(nodes, secrets, 8);
      expect(first.filter((s) => s === 200)).toHaveLength(23);
      expect(first.every((s) => s === 200 || s === 402 || s === 429)).toBe(true);

      // The same payment reaches both nodes at once: one adds it, the other finds it counted.
      const topups = await Promise.all(
        [a, b].map((node) => node.admin("POST", `/admin/orgs/${orgId}/topups`, { amount_mc: 7 * PRICE, reference: "pi_shared" })),
      );
      expect(topups.map((r) => r.status).sort()).toEqual([200, 201]);

      const second = await load(nodes, await twoKeys(), 8);
      expect(second.filter((s) => s === 200)).toHaveLength(7);
      expect(fx.calls.get("echo")).toBe(before + 30);

      for (const node of nodes) {
        const org = await adminJson(node, "GET", `/admin/orgs/${orgId}`);
        expect(org.budget).toMatchObject({ budget_mc: 30 * PRICE + PRICE - 1, spent_mc: 30 * PRICE, remaining_mc: PRICE - 1 });
        const keys = (await (await node.admin("GET", "/admin/keys")).json()) as { spent_mc: number }[];
        expect(keys.reduce((sum, k) => sum + k.spent_mc, 0)).toBe(30 * PRICE);
      }
      // The org's signed records (one envelope a line): the budget, then the one top-up.
      const ndjson = await (await a.admin("GET", `/admin/orgs/${orgId}/records`)).text();
      const types = ndjson
        .trim()
        .split("\n")
        .map((line) => (JSON.parse(line) as { record: { type: string } }).record.type);
      expect(types).toEqual(["budget_set", "topup"]);
    } finally {
      await Promise.all(nodes.map((node) => node.stop()));
    }
    const check = await runBinary(["desk", "check"], { env: { ASK_ONLY_DESK_DATABASE_URL: url } });
    expect(check.stderr).toBe("");
    expect(check.code).toBe(0);
  });
});
