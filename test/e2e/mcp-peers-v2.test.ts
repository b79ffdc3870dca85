// MCP peers of the current SDK generation against our binary: the v2 client
// (@modelcontextprotocol/client 2.x) on serve-mcp (stdio, with a real approver and a person
// deciding on its console) and on the desk's /mcp, in 'auto' negotiation (it falls back to the
// 2025 handshake) and pinned to 2026-07-28 (a clean -32022 refusal that names the versions we
// speak, never a hang); and a v2 server (@modelcontextprotocol/server 2.x) as a desk upstream,
// called through the clearing path with its receipt verified.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport, UnsupportedProtocolVersionError } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { startV2Upstream, type V2Upstream } from "../fixtures/v2-upstream.ts";
import { approverFiles, type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { type ApproverProcess, OutputWatch, startApprover } from "../helpers/approver-process.ts";
import { BINARY, runBinary } from "../helpers/binary.ts";
import { type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { serveMcpEnv } from "../helpers/mcp-client.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";
import { tempDir } from "../helpers/tmp.ts";

const NEWER = "2026-07-28";
const OURS = [...SUPPORTED_PROTOCOL_VERSIONS];
const AUTO = { mode: "auto" } as const;
const PINNED = { mode: { pin: NEWER } } as const;
/** A bound on the probe: a server that never answered would fail with a timeout, not -32022. */
const PROBE = { timeoutMs: 20_000 };

const tmp = tempDir("ask-only-v2-peers-");
afterAll(() => tmp[Symbol.dispose]());

/** What a pinned client's connect() rejected with, as plain data. */
async function refusalOf(connect: Promise<void>): Promise<{ isUnsupportedVersion: boolean; code: unknown; data: unknown }> {
  const err = await connect.then(
    () => new Error("connect() resolved"),
    (e: unknown) => e,
  );
  const e = err as { code?: unknown; data?: unknown };
  return { isUnsupportedVersion: err instanceof UnsupportedProtocolVersionError, code: e.code, data: e.data };
}

const PINNED_REFUSAL = { isUnsupportedVersion: true, code: -32022, data: { supported: OURS, requested: NEWER } };

describe("serve-mcp (stdio, compiled) with a v2 client", () => {
  let link: LinkPaths;
  let approver: ApproverProcess;
  let env: Record<string, string>;
  beforeAll(async () => {
    link = await writeLink(tmp.path);
    approver = await startApprover({ files: approverFiles(link), db: join(tmp.path, "asks.db") });
    env = serveMcpEnv(link, approver.url);
  });
  afterAll(async () => {
    await approver?.stop();
  });

  const stdio = () => new StdioClientTransport({ command: BINARY, args: ["serve-mcp"], env, stderr: "pipe" });

  test("auto: falls back to 2025-11-25, lists `request`, asks; the person approves; a bad call is a refusal result", async () => {
    const client = new Client({ name: "v2-agent", version: "2.4.0" }, { versionNegotiation: { ...AUTO, probe: PROBE } });
    await client.connect(stdio());
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe("2025-11-25");
      expect((await client.listTools()).tools.map((t) => t.name)).toEqual(["request"]);

      const asked = await client.callTool({ name: "request", arguments: { verb: "pay", ...PAY_FIELDS } });
      expect(asked.isError).toBeFalsy();
      const id = (asked.structuredContent as { approval_id: string; state: string }).approval_id;
      expect(asked.structuredContent).toMatchObject({ approval_id: id, state: "pending" });
      await approver.out.waitFor(new RegExp(`approve ${id}   or   deny ${id}`));
      const typed = approver.type(`approve ${id}`);
      await approver.out.waitFor(new RegExp(`${id}: approved: PAY 19\\.00 EUR at shop\\.example`), typed);
      const status = await client.callTool({ name: "request", arguments: { verb: "status", approval_id: id } });
      expect(status.structuredContent).toEqual({ approval_id: id, state: "approved", ref: expect.stringMatching(/^demo-[0-9a-f]{8}$/) });

      // A refusal is a tool result with isError and the code, not a protocol error.
      const refused = await client.callTool({ name: "request", arguments: { verb: "pay", amount: "19.00" } });
      expect(refused).toEqual({ isError: true, structuredContent: { error: "FIELD_MISSING" }, content: [{ type: "text", text: '{"error":"FIELD_MISSING"}' }] });
      const unknown = await client.callTool({ name: "pay_now", arguments: {} });
      expect(unknown.structuredContent).toEqual({ error: "TOOL_UNKNOWN" });
    } finally {
      await client.close();
    }
  });

  test(`pinned to ${NEWER}: connect() rejects with -32022 naming the versions serve-mcp speaks`, async () => {
    const client = new Client({ name: "v2-agent", version: "2.4.0" }, { versionNegotiation: { ...PINNED, probe: PROBE } });
    expect(await refusalOf(client.connect(stdio()))).toEqual(PINNED_REFUSAL);
    await client.close();
  });

  test("on the wire: server/discover gets -32022, and the same process then serves the 2025 handshake and exits 0 at end of input", async () => {
    const proc = Bun.spawn([BINARY, "serve-mcp"], { env, stdin: "pipe", stdout: "pipe", stderr: "pipe" });
    const out = new OutputWatch(proc.stdout);
    const send = (message: unknown) => {
      proc.stdin.write(`${JSON.stringify(message)}\n`);
      proc.stdin.flush();
    };
    const answer = async (id: number) => JSON.parse((await out.waitFor(new RegExp(`^(\\{"(?:result|error|jsonrpc)[^\\n]*"id":${id}[,}][^\\n]*)$`, "m")))[1]!);
    const meta = { "io.modelcontextprotocol/protocolVersion": NEWER, "io.modelcontextprotocol/clientCapabilities": {} };
    send({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: meta } });
    expect((await answer(1)).error).toEqual({
      code: -32022,
      message: `MCP error -32022: Unsupported protocol version ${NEWER}: this server speaks ${OURS.join(", ")}`,
      data: { supported: OURS, requested: NEWER },
    });
    send({
      jsonrpc: "2.0",
      id: 2,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "0" } },
    });
    expect((await answer(2)).result.protocolVersion).toBe("2025-11-25");
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 3, method: "tools/list" });
    expect((await answer(3)).result.tools.map((t: { name: string }) => t.name)).toEqual(["request"]);
    // Any other unknown method stays "method not found".
    send({ jsonrpc: "2.0", id: 4, method: "tools/frobnicate" });
    expect((await answer(4)).error.code).toBe(-32601);
    proc.stdin.end();
    expect(await proc.exited).toBe(0);
  });
});

describe("the desk's /mcp (compiled) with a v2 client", () => {
  let fx: UpstreamFixture;
  let desk: DeskProcess;
  let secret: string;
  beforeAll(async () => {
    fx = startUpstreamFixture();
    desk = await startDeskProcess(join(tmp.path, "desk"));
    expect((await desk.admin("POST", "/admin/upstreams", { name: "fx", url: fx.url })).status).toBe(201);
    expect((await desk.admin("PUT", "/admin/tools/fx__echo", { price_mc: 1500, upstream_cost_mc: 500 })).status).toBe(200);
    const org = (await (await desk.admin("POST", "/admin/orgs", { name: "v2" })).json()) as { org_id: string };
    const key = await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10_000, reset: "none", allow: ["fx__echo"] });
    secret = ((await key.json()) as { secret: string }).secret;
  });
  afterAll(async () => {
    expect(await desk?.stop()).toBe(0);
    await fx?.stop();
  });

  const http = (key: string | null) =>
    new StreamableHTTPClientTransport(new URL(`${desk.url}/mcp`), key === null ? {} : { requestInit: { headers: { authorization: `Bearer ${key}` } } });

  test("auto: falls back to 2025-11-25, lists the key's tools, pays for a call whose receipt verifies; a refused tool is a result with its receipt", async () => {
    const client = new Client({ name: "v2-agent", version: "2.4.0" }, { versionNegotiation: { ...AUTO, probe: PROBE } });
    await client.connect(http(secret));
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe("2025-11-25");
      const tools = (await client.listTools()).tools;
      expect(tools.map((t) => t.name)).toEqual(["fx__echo"]);
      expect(tools[0]!.description).toContain("Price: 1,500 mc (1.5 cents) per call.");

      const paid = await client.callTool({ name: "fx__echo", arguments: { text: "from a v2 client" } });
      const saved = join(tmp.path, "v2-paid.json");
      writeFileSync(saved, JSON.stringify(paid));
      writeFileSync(join(tmp.path, "v2-args.json"), JSON.stringify({ text: "from a v2 client" }));
      writeFileSync(join(tmp.path, "jwks.json"), await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
      const verified = await runBinary(["verify-receipt", saved, "--keys", join(tmp.path, "jwks.json"), "--args", join(tmp.path, "v2-args.json")]);
      expect({ code: verified.code, stderr: verified.stderr }).toEqual({ code: 0, stderr: "" });
      expect(verified.stdout).toContain("ok   result (matches result_sha256)");

      const refused = await client.callTool({ name: "fx__add", arguments: { a: 1, b: 2 } });
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent).toEqual({ error: "TOOL_NOT_ALLOWED" });
      const envelope = refused._meta?.["io.ask-only/receipt"] as { receipt: { outcome: string; amount_mc: number } } | undefined;
      const receipt = envelope?.receipt;
      expect({ outcome: receipt?.outcome, amount_mc: receipt?.amount_mc }).toEqual({ outcome: "refused_not_allowed", amount_mc: 0 });
    } finally {
      await client.close();
    }
  });

  test("auto without a key: connect() rejects with the desk's 401", async () => {
    const client = new Client({ name: "v2-agent", version: "2.4.0" }, { versionNegotiation: { ...AUTO, probe: PROBE } });
    const err = (await client.connect(http(null)).then(
      () => new Error("connect() resolved"),
      (e: unknown) => e,
    )) as { data?: { status?: number } };
    expect(err.data?.status).toBe(401);
    await client.close();
  });

  test(`pinned to ${NEWER}: connect() rejects with -32022 naming the versions the desk speaks; the desk serves on`, async () => {
    const client = new Client({ name: "v2-agent", version: "2.4.0" }, { versionNegotiation: { ...PINNED, probe: PROBE } });
    expect(await refusalOf(client.connect(http(secret)))).toEqual(PINNED_REFUSAL);
    await client.close();

    // On the wire: HTTP 400 with the JSON-RPC error, before the SDK transport.
    const wire = await fetch(`${desk.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${secret}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-protocol-version": NEWER,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "server/discover", params: {} }),
    });
    expect(wire.status).toBe(400);
    expect(await wire.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: {
        code: -32022,
        message: `Unsupported protocol version ${NEWER}: this server speaks ${OURS.join(", ")}`,
        data: { supported: OURS, requested: NEWER },
      },
    });

    const after = new Client({ name: "v2-agent", version: "2.4.0" }, { versionNegotiation: { ...AUTO, probe: PROBE } });
    await after.connect(http(secret));
    expect((await after.listTools()).tools.map((t) => t.name)).toEqual(["fx__echo"]);
    await after.close();
    expect(desk.stderr()).not.toContain("internal error");
  });
});

describe("a v2 SDK server as a desk upstream", () => {
  let v2: V2Upstream;
  let desk: DeskProcess;
  beforeAll(async () => {
    v2 = startV2Upstream();
    desk = await startDeskProcess(join(tmp.path, "desk-v2"));
  });
  afterAll(async () => {
    expect(await desk?.stop()).toBe(0);
    await v2?.stop();
  });

  test(`the upstream speaks ${NEWER} to a v2 client, and its legacy lane to the desk`, async () => {
    const direct = new Client({ name: "v2-direct", version: "2.4.0" }, { versionNegotiation: { ...AUTO, probe: PROBE } });
    await direct.connect(new StreamableHTTPClientTransport(new URL(v2.url)));
    expect(direct.getNegotiatedProtocolVersion()).toBe(NEWER);
    expect((await direct.listTools()).tools.map((t) => t.name)).toEqual(["quote"]);
    await direct.close();

    const eras = v2.eras.length;
    const registered = await desk.admin("POST", "/admin/upstreams", { name: "v2", url: v2.url });
    expect(registered.status).toBe(201);
    expect(((await registered.json()) as { tools: string[] }).tools).toEqual(["v2__quote"]);
    expect(new Set(v2.eras.slice(eras))).toEqual(new Set(["legacy"]));
  });

  test("a paid call through the clearing path: charged, answered by the v2 server, its receipt verifies offline", async () => {
    expect((await desk.admin("PUT", "/admin/tools/v2__quote", { price_mc: 2500, upstream_cost_mc: 1000 })).status).toBe(200);
    const org = (await (await desk.admin("POST", "/admin/orgs", { name: "v2-upstream" })).json()) as { org_id: string };
    const key = await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10_000, reset: "none", allow: ["v2__quote"] });
    const secret = ((await key.json()) as { secret: string }).secret;
    const args = { sku: "ABC-1" };
    const before = v2.calls();
    const res = await fetch(`${desk.url}/v1/tools/v2__quote`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify(args),
    });
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(res.headers.get("x-clearing-outcome")).toBe("charged");
    expect(res.headers.get("x-clearing-remaining-mc")).toBe("7500");
    expect((JSON.parse(text) as { result: { content: unknown } }).result.content).toEqual([{ type: "text", text: "ABC-1: 12.34 EUR" }]);
    expect(v2.calls()).toBe(before + 1);

    writeFileSync(join(tmp.path, "v2-upstream.json"), text);
    writeFileSync(join(tmp.path, "v2-upstream-args.json"), JSON.stringify(args));
    writeFileSync(join(tmp.path, "v2-jwks.json"), await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
    const verified = await runBinary([
      "verify-receipt",
      join(tmp.path, "v2-upstream.json"),
      "--keys",
      join(tmp.path, "v2-jwks.json"),
      "--args",
      join(tmp.path, "v2-upstream-args.json"),
    ]);
    expect(verified.stdout.split("\n").filter((l) => l.startsWith("ok"))).toHaveLength(4);
    expect({ code: verified.code, stderr: verified.stderr }).toEqual({ code: 0, stderr: "" });

    // Arguments the tool's schema refuses never reach the v2 server and cost nothing.
    const bad = await fetch(`${desk.url}/v1/tools/v2__quote`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify({ sku: "" }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe("ARGS_INVALID");
    expect(v2.calls()).toBe(before + 1);
    expect(desk.stderr()).not.toContain("internal error");
  });
});
