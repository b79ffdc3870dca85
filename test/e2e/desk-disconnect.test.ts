// An agent that disconnects mid-call is still charged (the upstream did the work), so what it
// paid for stays fetchable: through the compiled desk, a real client drops its connection while
// the upstream is still working; the agent then finds the charged receipt in its key's listing
// and fetches the held result, which verify-receipt accepts. Nothing is held for an answer that
// was delivered, and no other key can read it.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Envelope } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { runBinary } from "../helpers/binary.ts";
import { adminJson, callTool, type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);

const tmp = tempDir("desk-disconnect-");
let fx: UpstreamFixture;
let desk: DeskProcess;
let agent: string;
let other: string;

beforeAll(async () => {
  fx = startUpstreamFixture();
  desk = await startDeskProcess(join(tmp.path, "d"));
  await adminJson(desk, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
  for (const tool of ["fx__hang", "fx__echo"]) await adminJson(desk, "PUT", `/admin/tools/${tool}`, { price_mc: 700, upstream_cost_mc: 0 });
  const org = (await adminJson(desk, "POST", "/admin/orgs", { name: "agents" })).org_id;
  agent = (await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 10_000, reset: "none", allow: ["fx__hang", "fx__echo"] })).secret as string;
  other = (await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 10_000, reset: "none", allow: ["fx__echo"] })).secret as string;
});

afterAll(async () => {
  await desk.stop();
  await fx.stop();
  tmp[Symbol.dispose]();
});

const get = (path: string, secret: string) => fetch(`${desk.url}${path}`, { headers: { authorization: `Bearer ${secret}` } });
type Listing = { receipts: Envelope[]; held_results: string[] };

test("a client that disconnects mid-call finds its receipt and the result it paid for", async () => {
  const started = new Date().toISOString();
  const gone = new AbortController();
  const call = fetch(`${desk.url}/v1/tools/fx__hang`, {
    method: "POST",
    headers: { authorization: `Bearer ${agent}`, "content-type": "application/json" },
    body: "{}",
    signal: gone.signal,
  });
  await fx.whenHanging(1);
  gone.abort();
  await expect(call).rejects.toThrow();
  // Two round trips to the desk after the close: its event loop has seen the closed socket.
  for (let i = 0; i < 2; i++) await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).arrayBuffer();
  fx.release();

  // The agent comes back: its key's receipts since it started, until the charge is there.
  let listing: Listing = { receipts: [], held_results: [] };
  for (let tries = 0; tries < 5000 && listing.held_results.length === 0; tries++) {
    listing = (await (await get(`/v1/receipts?since=${started}`, agent)).json()) as Listing;
  }
  const charged = listing.receipts.filter((e) => e.receipt.outcome === "charged" && e.receipt.tool === "fx__hang");
  expect(charged).toHaveLength(1);
  const receipt = charged[0]!;
  expect(receipt.receipt.amount_mc).toBe(700);
  expect(listing.held_results).toEqual([receipt.receipt.id]);

  const r = await get(`/v1/receipts/${receipt.receipt.id}/result`, agent);
  expect(r.status).toBe(200);
  const body = (await r.json()) as { result: { content: { text: string }[] }; receipt: Envelope };
  expect(body.result.content[0]!.text).toBe("released");
  expect(body.receipt).toEqual(receipt);
  // The fetched body is the success body the agent missed: verify-receipt checks it offline.
  const saved = join(tmp.path, "held.json");
  const keys = join(tmp.path, "jwks.json");
  writeFileSync(saved, JSON.stringify(body));
  writeFileSync(keys, await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
  const verified = await runBinary(["verify-receipt", saved, "--keys", keys]);
  expect({ code: verified.code, stderr: verified.stderr }).toEqual({ code: 0, stderr: "" });

  // Another key, even of the same organization, cannot read it.
  const foreign = await get(`/v1/receipts/${receipt.receipt.id}/result`, other);
  expect([foreign.status, await foreign.json()]).toEqual([404, { error: "RESULT_UNKNOWN" }]);
  expect(desk.stderr()).toContain(`receipt ${receipt.receipt.id}: the agent disconnected before its answer; the result is held for 60 min`);
});

test("a delivered answer is not held; the listing is the key's own, in chain order", async () => {
  const r = await callTool(desk.url, agent, "fx__echo", { text: "delivered" });
  const id = r.headers.get("x-clearing-receipt-id")!;
  expect(r.status).toBe(200);
  const held = await get(`/v1/receipts/${id}/result`, agent);
  expect([held.status, await held.json()]).toEqual([404, { error: "RESULT_UNKNOWN" }]);
  const listing = (await (await get("/v1/receipts", agent)).json()) as Listing;
  expect(listing.receipts.map((e) => e.receipt.seq)).toEqual(listing.receipts.map((_, i) => i + 1));
  expect(listing.receipts.every((e) => e.receipt.key_id === listing.receipts[0]!.receipt.key_id)).toBe(true);
  expect(listing.receipts.at(-1)!.receipt.id).toBe(id);
  expect(listing.held_results).not.toContain(id);
  expect(((await (await get("/v1/receipts", other)).json()) as Listing).receipts).toEqual([]);
});

test("over /mcp too: an MCP agent that disconnects mid-call fetches the result it paid for", async () => {
  const started = new Date().toISOString();
  const gone = new AbortController();
  const call = fetch(`${desk.url}/mcp`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${agent}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25",
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fx__hang", arguments: {} } }),
    signal: gone.signal,
  });
  await fx.whenHanging(1);
  gone.abort();
  await expect(call).rejects.toThrow();
  for (let i = 0; i < 2; i++) await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).arrayBuffer();
  fx.release();
  let listing: Listing = { receipts: [], held_results: [] };
  for (let tries = 0; tries < 5000 && listing.held_results.length === 0; tries++) {
    listing = (await (await get(`/v1/receipts?since=${started}`, agent)).json()) as Listing;
  }
  const charged = listing.receipts.filter((e) => e.receipt.outcome === "charged" && e.receipt.tool === "fx__hang");
  expect(charged).toHaveLength(1);
  expect(listing.held_results).toEqual([charged[0]!.receipt.id]);
  const r = await get(`/v1/receipts/${charged[0]!.receipt.id}/result`, agent);
  expect(r.status).toBe(200);
  expect(((await r.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text).toBe("released");
});
