// The failure limit holds under concurrency, against the compiled desk: 100 concurrent calls of
// one key to a tool that always fails reach the upstream at most 20 times (the upstream's own
// counter); the rest are 429 TOO_MANY_FAILURES. Calls still running count until they are
// charged, so a key with 20 calls in flight gets 429 for the next one, and room again as they
// succeed.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { adminJson, callTool, type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(60_000);

const tmp = tempDir("desk-failure-limit-");
let fx: UpstreamFixture;
let desk: DeskProcess;
let org: string;

beforeAll(async () => {
  fx = startUpstreamFixture();
  desk = await startDeskProcess(join(tmp.path, "d"));
  await adminJson(desk, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
  org = (await adminJson(desk, "POST", "/admin/orgs", { name: "limits" })).org_id as string;
});

afterAll(async () => {
  await desk.stop();
  await fx.stop();
  tmp[Symbol.dispose]();
});

const newKey = async (allow: string[]) =>
  (await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 1_000_000, reset: "none", allow })).secret as string;

const tally = (statuses: number[]) => {
  const out: Record<number, number> = {};
  for (const s of statuses) out[s] = (out[s] ?? 0) + 1;
  return out;
};

test("100 concurrent failing calls of one key: at most 20 reach the upstream, the rest are 429", async () => {
  const secret = await newKey(["fx__tool_error", "fx__echo"]);
  const before = fx.calls.get("tool_error") ?? 0;
  const answers = await Promise.all(
    Array.from({ length: 100 }, async () => {
      const r = await callTool(desk.url, secret, "fx__tool_error", {});
      return { status: r.status, body: (await r.json()) as { error: string } };
    }),
  );
  const reached = (fx.calls.get("tool_error") ?? 0) - before;
  expect(reached).toBeLessThanOrEqual(20);
  expect(tally(answers.map((a) => a.status))).toEqual({ 502: reached, 429: 100 - reached });
  for (const a of answers.filter((x) => x.status === 429)) expect(a.body).toEqual({ error: "TOO_MANY_FAILURES" });
  // The hour's 20 failures are spent: even a call that would succeed is refused, and never sent.
  const echoes = fx.calls.get("echo") ?? 0;
  expect((await callTool(desk.url, secret, "fx__echo", { text: "after" })).status).toBe(429);
  expect(fx.calls.get("echo") ?? 0).toBe(echoes);
});

test("calls in flight count until charged: the 21st concurrent call waits for none, it gets 429; success frees the room", async () => {
  const secret = await newKey(["fx__hang", "fx__echo"]);
  const hung = Array.from({ length: 20 }, () => callTool(desk.url, secret, "fx__hang", {}));
  await fx.whenHanging(20);
  const extra = await callTool(desk.url, secret, "fx__echo", { text: "21st" });
  expect([extra.status, await extra.json()]).toEqual([429, { error: "TOO_MANY_FAILURES" }]);
  fx.release();
  expect((await Promise.all(hung)).map((r) => r.status)).toEqual(Array.from({ length: 20 }, () => 200));
  // All 20 were charged: none of them counts as a failure any more.
  expect((await callTool(desk.url, secret, "fx__echo", { text: "again" })).status).toBe(200);
});
