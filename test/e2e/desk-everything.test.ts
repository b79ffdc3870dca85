// The reference MCP server from npm (@modelcontextprotocol/server-everything) as a real upstream
// of the compiled desk: registered through the operator API with its real schemas, then a paid
// call to everything__echo whose saved response `ask-only verify-receipt` accepts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
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
      const key = (await (await admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10_000, reset: "daily", allow: ["everything__echo"] })).json()) as {
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
      const verified = await runBinary(["verify-receipt", join(tmp.path, "response.json"), "--keys", join(tmp.path, "jwks.json"), "--args", join(tmp.path, "args.json")]);
      expect(verified.stderr).toBe("");
      expect(verified.code).toBe(0);
      expect(verified.stdout).toMatch(/^ok {3}signature/m);
      expect(verified.stdout).not.toContain("FAILED");
    } finally {
      expect(await desk.stop()).toBe(0);
    }
  });
});
