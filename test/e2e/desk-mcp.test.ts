// The compiled desk's MCP endpoint as an agent and an auditor meet it: the SDK's client pays for
// a call over /mcp, the answer is saved to a file exactly as it came off the wire, and
// `ask-only verify-receipt` accepts it (and refuses it with one character changed). The Host
// rule follows --listen and --allowed-host. Clients that are not ours: the SDK's v2 client in
// mcp-peers-v2.test.ts, the MCP Inspector and the conformance suite in `npm run check:desk-mcp`.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { runBinary } from "../helpers/binary.ts";
import { type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";

const TOKEN = "e2e-mcp-admin-token-abcdefghijklmnopqrstuvwxyz0123";

/** Starts `ask-only desk` on 127.0.0.1:0 and waits for its listening line. */
const startDesk = (data: string, extra: string[] = []) => startDeskProcess(data, extra, { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN }, token: TOKEN });

let fx: UpstreamFixture;
let tmp: ReturnType<typeof tempDir>;
let desk: DeskProcess;
let secret: string;

beforeAll(async () => {
  fx = startUpstreamFixture();
  tmp = tempDir("desk-mcp-e2e-");
  desk = await startDesk(join(tmp.path, "data"));
  expect((await desk.admin("POST", "/admin/upstreams", { name: "fx", url: fx.url })).status).toBe(201);
  expect((await desk.admin("PUT", "/admin/tools/fx__echo", { price_mc: 1500, upstream_cost_mc: 500 })).status).toBe(200);
  const org = (await (await desk.admin("POST", "/admin/orgs", { name: "agents" })).json()) as { org_id: string };
  const key = await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10_000, reset: "none", allow: ["fx__echo", "fx__add"] });
  secret = ((await key.json()) as { secret: string }).secret;
});

afterAll(async () => {
  expect(await desk.stop()).toBe(0);
  await fx.stop();
  tmp[Symbol.dispose]();
});

describe("desk /mcp through the binary", () => {
  test("an MCP result saved off the wire passes verify-receipt; one changed character fails it", async () => {
    const args = { text: "paid over MCP, checked offline" };
    const r = await fetch(`${desk.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${secret}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fx__echo", arguments: args } }),
    });
    expect(r.status).toBe(200);
    const wire = await r.text();
    const result = (JSON.parse(wire) as { result: unknown }).result;
    const saved = join(tmp.path, "saved.json");
    const keys = join(tmp.path, "jwks.json");
    const argsFile = join(tmp.path, "args.json");
    writeFileSync(saved, JSON.stringify(result, null, 2));
    writeFileSync(keys, await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
    writeFileSync(argsFile, JSON.stringify(args));

    const ok = await runBinary(["verify-receipt", saved, "--keys", keys, "--args", argsFile]);
    expect(ok.stderr).toBe("");
    expect(ok.code).toBe(0);
    expect(ok.stdout).not.toContain("FAILED");

    // One character of the answer the agent was charged for.
    const tampered = join(tmp.path, "tampered.json");
    writeFileSync(tampered, JSON.stringify(result, null, 2).replace("checked offline", "checked offlinE"));
    const bad = await runBinary(["verify-receipt", tampered, "--keys", keys, "--args", argsFile]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain("FAILED");
  });

  test("the same through the SDK client: its parsed result, saved as JSON, verifies", async () => {
    const client = new Client({ name: "e2e-agent", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${desk.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${secret}` } } }));
    const listed = await client.listTools();
    expect(listed.tools.map((t) => t.name).sort()).toEqual(["fx__add", "fx__echo"]);
    const result = await client.callTool({ name: "fx__echo", arguments: { text: "sdk" } });
    await client.close();
    const saved = join(tmp.path, "sdk.json");
    writeFileSync(saved, JSON.stringify(result));
    writeFileSync(join(tmp.path, "sdk-args.json"), '{"text":"sdk"}');
    writeFileSync(join(tmp.path, "jwks2.json"), await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
    const ok = await runBinary(["verify-receipt", saved, "--keys", join(tmp.path, "jwks2.json"), "--args", join(tmp.path, "sdk-args.json")]);
    expect({ code: ok.code, stderr: ok.stderr }).toEqual({ code: 0, stderr: "" });
  });

  test("Host: loopback names on the listening port pass; another name only with --allowed-host", async () => {
    const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
    const post = (url: string, host: string) =>
      fetch(`${url}/mcp`, {
        method: "POST",
        headers: {
          host,
          authorization: `Bearer ${secret}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2025-11-25",
        },
        body: init,
      });
    expect((await post(desk.url, `localhost:${desk.port}`)).status).toBe(200);
    expect((await post(desk.url, "desk.example.com")).status).toBe(403);
    const usage = await runBinary(["desk", "--allowed-host", "bad host", "--data", join(tmp.path, "never")]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("--allowed-host bad host is not NAME or NAME:PORT");
  });
});
