// The reference MCP server from npm (@modelcontextprotocol/server-everything) as a real upstream
// of the compiled desk: registered through the operator API with its real schemas, then a paid
// call to everything__echo whose saved response `ask-only verify-receipt` accepts; every tool's
// own listed fields and a structured answer reach an MCP agent exactly as the server sent them.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { runBinary, testEnv } from "../helpers/binary.ts";
import { collectText, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

const TOKEN = "e2e-everything-admin-token-0123456789abcdefghij";
const EVERYTHING = resolve(import.meta.dir, "../../node_modules/@modelcontextprotocol/server-everything/dist/index.js");
// server-everything listens on every interface, on $PORT: this preload pins its listen() to
// loopback and reports the port the system chose (PORT=0), so the test waits for that line.
const LOOPBACK_ONLY =
  'data:text/javascript,import net from "node:net"; const listen = net.Server.prototype.listen; net.Server.prototype.listen = function (...a) { if (typeof a[0] === "number" || typeof a[0] === "string") a.splice(1, 0, "127.0.0.1"); this.once("listening", () => process.stderr.write("bound port " + this.address().port + "\\n")); return listen.apply(this, a); };';

let everything: ReturnType<typeof Bun.spawn>;
let everythingUrl: string;

beforeAll(async () => {
  everything = Bun.spawn(["node", "--import", LOOPBACK_ONLY, EVERYTHING, "streamableHttp"], {
    env: testEnv({ PORT: "0" }),
    stdout: "ignore",
    stderr: "pipe",
  });
  const port = (await collectText(everything.stderr as ReadableStream<Uint8Array>).until(/bound port (\d+)\n/))[1]!;
  everythingUrl = `http://127.0.0.1:${port}/mcp`;
}, 30_000);

afterAll(async () => {
  everything.kill();
  await everything.exited;
});

describe("desk in front of server-everything", () => {
  test("registered through the operator API; a paid everything__echo call verifies offline", async () => {
    await using tmp = tempDir();
    const desk = await startDeskProcess(join(tmp.path, "d"), [], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN }, token: TOKEN });
    const { url, admin } = desk;
    try {
      const reg = await admin("POST", "/admin/upstreams", { name: "everything", url: everythingUrl });
      expect(reg.status).toBe(201);
      const tools = ((await reg.json()) as { tools: string[] }).tools;
      expect(tools).toEqual(expect.arrayContaining(["everything__echo", "everything__get-sum"]));
      const listed = (await (await admin("GET", "/admin/tools")).json()) as { name: string; input_schema: { properties?: Record<string, unknown> } }[];
      expect(listed.find((t) => t.name === "everything__echo")!.input_schema.properties).toHaveProperty("message");

      expect((await admin("PUT", "/admin/tools/everything__echo", { price_mc: 1500, upstream_cost_mc: 200 })).status).toBe(200);
      const org = (await (await admin("POST", "/admin/orgs", { name: "demo" })).json()) as { org_id: string };
      const key = (await (
        await admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10_000, reset: "daily", allow: ["everything__echo"] })
      ).json()) as {
        secret: string;
      };
      const call = (args: unknown) =>
        fetch(`${url}/v1/tools/everything__echo`, {
          method: "POST",
          headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
          body: JSON.stringify(args),
        });

      // The real schema refuses a missing message before anything is charged.
      const invalid = await call({});
      expect(invalid.status).toBe(400);
      expect(await invalid.json()).toEqual({ error: "ARGS_INVALID", problems: [{ path: "/message", rule: "required" }] });

      const args = { message: "paid hello" };
      const r = await call(args);
      expect(r.status).toBe(200);
      expect(r.headers.get("x-clearing-outcome")).toBe("charged");
      expect(r.headers.get("x-clearing-remaining-mc")).toBe("8500");
      const saved = await r.text();
      expect(JSON.parse(saved).result.content[0].text).toContain("paid hello");

      const jwks = await (await fetch(`${url}/.well-known/receipt-signing-key.json`)).text();
      writeFileSync(join(tmp.path, "response.json"), saved);
      writeFileSync(join(tmp.path, "jwks.json"), jwks);
      writeFileSync(join(tmp.path, "args.json"), JSON.stringify(args));
      const verified = await runBinary([
        "verify-receipt",
        join(tmp.path, "response.json"),
        "--keys",
        join(tmp.path, "jwks.json"),
        "--args",
        join(tmp.path, "args.json"),
      ]);
      expect(verified.stderr).toBe("");
      expect(verified.code).toBe(0);
      expect(verified.stdout).toMatch(/^ok {3}signature/m);
      expect(verified.stdout).not.toContain("FAILED");
    } finally {
      expect(await desk.stop()).toBe(0);
    }
  });

  test("each tool's title, outputSchema, annotations and _meta, and a structured answer, pass through the desk's /mcp unchanged", async () => {
    await using tmp = tempDir();
    const desk = await startDeskProcess(join(tmp.path, "d"), [], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN }, token: TOKEN });
    const direct = new Client({ name: "e2e-direct", version: "1.0.0" });
    try {
      // What the server itself lists and answers, read as sent (the SDK's parsed copy could differ).
      await direct.connect(new StreamableHTTPClientTransport(new URL(everythingUrl)));
      const own = ((await direct.request({ method: "tools/list" }, ResultSchema)) as { tools: Record<string, unknown>[] }).tools;
      const args = { location: "Chicago" };
      const ownAnswer = await direct.request({ method: "tools/call", params: { name: "get-structured-content", arguments: args } }, ResultSchema);
      expect(own.some((t) => t.outputSchema !== undefined && t.annotations !== undefined)).toBe(true);

      expect((await desk.admin("POST", "/admin/upstreams", { name: "everything", url: everythingUrl })).status).toBe(201);
      expect((await desk.admin("PUT", "/admin/tools/everything__get-structured-content", { price_mc: 700, upstream_cost_mc: 100 })).status).toBe(200);
      const org = (await (await desk.admin("POST", "/admin/orgs", { name: "demo" })).json()) as { org_id: string };
      const allow = own.map((t) => `everything__${t.name}`);
      const key = (await (await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10_000, reset: "none", allow })).json()) as {
        secret: string;
      };
      const rpc = (body: unknown) =>
        fetch(`${desk.url}/mcp`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${key.secret}`,
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            "mcp-protocol-version": "2025-11-25",
          },
          body: JSON.stringify(body),
        });

      const listed = ((await (await rpc({ jsonrpc: "2.0", id: 1, method: "tools/list" })).json()) as { result: { tools: Record<string, unknown>[] } }).result
        .tools;
      const byName = new Map(listed.map((t) => [t.name, t]));
      for (const t of own) {
        const seen = byName.get(`everything__${t.name}`)!;
        for (const field of ["title", "outputSchema", "annotations", "_meta", "inputSchema"]) {
          expect(`${t.name}.${field}: ${JSON.stringify(seen[field])}`).toBe(`${t.name}.${field}: ${JSON.stringify(t[field])}`);
        }
      }

      const wire = await (
        await rpc({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "everything__get-structured-content", arguments: args } })
      ).text();
      const { _meta, ...answer } = (JSON.parse(wire) as { result: Record<string, unknown> }).result;
      expect(answer).toEqual(ownAnswer as Record<string, unknown>);
      expect(Object.keys(_meta as object)).toEqual(["io.ask-only/receipt"]);

      writeFileSync(join(tmp.path, "rpc.json"), wire);
      writeFileSync(join(tmp.path, "jwks.json"), await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
      writeFileSync(join(tmp.path, "args.json"), JSON.stringify(args));
      const verified = await runBinary([
        "verify-receipt",
        join(tmp.path, "rpc.json"),
        "--keys",
        join(tmp.path, "jwks.json"),
        "--args",
        join(tmp.path, "args.json"),
      ]);
      expect(verified).toMatchObject({ code: 0, stderr: "" });
      expect(verified.stdout).toContain("ok   result (matches result_sha256)");
    } finally {
      await direct.close();
      expect(await desk.stop()).toBe(0);
    }
  });
});
