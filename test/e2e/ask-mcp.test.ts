// serve-mcp as an MCP server: one tool with a flat schema and honest annotations; stdout holds
// JSON-RPC only; it leaves when the client closes stdin.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { BINARY } from "../helpers/binary.ts";
import { connectServeMcp, serveMcpEnv } from "../helpers/mcp-client.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);
const dir = tempDir("ask-only-mcp-");
let link: LinkPaths;
beforeAll(async () => {
  link = await writeLink(dir.path);
});
afterAll(() => dir[Symbol.dispose]());

/** Every key anywhere in a JSON value. */
function keysDeep(value: unknown, out: string[] = []): string[] {
  if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      out.push(k);
      keysDeep(v, out);
    }
  }
  return out;
}

describe("tools/list", () => {
  test("one tool, `request`: flat input schema, strict, honest annotations, and a description that says what it cannot do", async () => {
    await using mcp = await connectServeMcp(serveMcpEnv(link, "https://localhost:1"));
    const { tools } = await mcp.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(["request"]);
    const tool = tools[0]!;
    expect(tool.annotations).toEqual({
      title: "Ask a person to pay or to create an account",
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: true,
    });
    const schema = tool.inputSchema as {
      type: string;
      properties: Record<string, { type: string; enum?: string[] }>;
      required: string[];
      additionalProperties: boolean;
    };
    expect(schema.type).toBe("object");
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(["verb"]);
    expect(schema.properties.verb!.enum).toEqual(["pay", "account_create", "status"]);
    expect(Object.keys(schema.properties).sort()).toEqual([
      "amount",
      "approval_id",
      "card_handle",
      "checkout_url",
      "currency",
      "identity_handle",
      "merchant",
      "provider_url",
      "reason",
      "verb",
    ]);
    for (const p of Object.values(schema.properties)) expect(p.type).toBe("string");
    // Flat: no combinators or references anywhere (some clients refuse them).
    for (const k of keysDeep(schema)) expect(["oneOf", "anyOf", "allOf", "not", "$ref", "if", "then"]).not.toContain(k);
    const d = tool.description!;
    for (const words of [
      "cannot pay, approve or deny",
      "handles",
      '"pending" and "denied" are normal answers, not obstacles to work around',
      "never send a card number",
      '"failed" means the person approved, but the step the approver runs behind an approval',
      "Nothing is retried",
    ]) {
      expect(d).toContain(words);
    }
    expect(tool.outputSchema?.type).toBe("object");
    expect((tool.outputSchema as unknown as { properties: { state: { enum: string[] } } }).properties.state.enum).toEqual([
      "pending",
      "approved",
      "denied",
      "expired",
      "failed",
    ]);
  });

  test("an unknown tool name gets a code", async () => {
    await using mcp = await connectServeMcp(serveMcpEnv(link, "https://localhost:1"));
    const r = await mcp.client.callTool({ name: "approve", arguments: {} });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toEqual({ error: "TOOL_UNKNOWN" });
  });
});

describe("the stdio channel", () => {
  test("stdout carries JSON-RPC only; stderr has no agent text; closing stdin ends it with exit 0", async () => {
    const proc = Bun.spawn([BINARY, "serve-mcp"], { env: serveMcpEnv(link, "https://localhost:1"), stdin: "pipe", stdout: "pipe", stderr: "pipe" });
    const send = (msg: object) => proc.stdin.write(`${JSON.stringify(msg)}\n`);
    send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "0" } } });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    send({
      jsonrpc: "2.0",
      id: 3,
      method: "tools/call",
      params: {
        name: "request",
        arguments: {
          verb: "pay",
          merchant: "Secret Merchant Words",
          amount: "19.00",
          currency: "EUR",
          card_handle: "card-2",
          checkout_url: "https://shop.example/",
        },
      },
    });
    send({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "request", arguments: { verb: "pay", reason: "4111 1111 1111 1111" } } });
    // Close stdin once the last answer is out.
    const reader = proc.stdout.getReader();
    let out = "";
    const decoder = new TextDecoder();
    while (!out.includes('"id":4')) {
      const { done, value } = await reader.read();
      if (done) break;
      out += decoder.decode(value, { stream: true });
    }
    proc.stdin.end();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      out += decoder.decode(value, { stream: true });
    }
    expect(await proc.exited).toBe(0);
    const stderr = await new Response(proc.stderr).text();
    const messages = out
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as { jsonrpc: string; id: number; result: { structuredContent?: unknown } })
      .sort((a, b) => a.id - b.id);
    expect(messages.map((m) => [m.jsonrpc, m.id])).toEqual([
      ["2.0", 1],
      ["2.0", 2],
      ["2.0", 3],
      ["2.0", 4],
    ]);
    expect(messages[2]!.result.structuredContent).toEqual({ error: "APPROVER_UNREACHABLE" });
    expect(messages[3]!.result.structuredContent).toEqual({ error: "CARD_NUMBER_REFUSED" });
    expect(stderr).not.toContain("Secret Merchant Words");
    expect(stderr).not.toContain("4111");
    expect(stderr).toContain("serve-mcp ready on stdio");
  });
});
