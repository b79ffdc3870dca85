// The desk's fetch handler on a real Bun.serve (127.0.0.1, port 0) for the MCP tests, and an SDK
// client that speaks to its /mcp with a bearer key.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { TestDesk } from "./desk-harness.ts";

export type ServedDesk = { url: string; port: number; stop(): Promise<void> } & AsyncDisposable;

export function serveDesk(t: TestDesk): ServedDesk {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: 0, fetch: (req, s) => t.handler(req, s) });
  const stop = async () => {
    await server.stop(true);
  };
  return { url: `http://127.0.0.1:${server.port}`, port: server.port!, stop, [Symbol.asyncDispose]: stop };
}

export type AgentClient = { client: Client } & AsyncDisposable;

export async function mcpClient(baseUrl: string, secret: string): Promise<AgentClient> {
  const client = new Client({ name: "desk-mcp-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${secret}` } } });
  await client.connect(transport);
  return {
    client,
    async [Symbol.asyncDispose]() {
      await client.close();
    },
  };
}

/** One raw JSON-RPC POST to /mcp (for what the SDK client would hide: status, headers, bytes). */
export function rawMcp(baseUrl: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${baseUrl}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25", ...headers },
    body: JSON.stringify(body),
  });
}
