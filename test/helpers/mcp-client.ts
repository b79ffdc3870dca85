// serve-mcp as an agent's MCP client sees it: the SDK's Client over stdio, driving the compiled
// binary as a real process.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { BINARY, testEnv } from "./binary.ts";
import type { LinkPaths } from "./approver-link.ts";

export type ServeMcp = {
  client: Client;
  transport: StdioClientTransport;
  /** serve-mcp's stderr, as it arrives. */
  stderr: () => string;
  /** Calls the `request` tool and returns structuredContent and the result. */
  request: (args: Record<string, unknown>) => Promise<{ sc: Record<string, unknown>; isError: boolean; text: string }>;
} & AsyncDisposable;

export function serveMcpEnv(paths: LinkPaths, url: string, extra: Record<string, string> = {}): Record<string, string> {
  return testEnv({
    ASK_ONLY_PAY_URL: url,
    ASK_ONLY_PAY_CLIENT_CERT: paths.clientCert,
    ASK_ONLY_PAY_CLIENT_KEY: paths.clientKey,
    ASK_ONLY_PAY_CA: paths.approverCa,
    ...extra,
  });
}

export async function connectServeMcp(env: Record<string, string>): Promise<ServeMcp> {
  const transport = new StdioClientTransport({ command: BINARY, args: ["serve-mcp"], env, stderr: "pipe" });
  let err = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    err += chunk.toString("utf8");
  });
  const client = new Client({ name: "ask-only-test", version: "0.0.0" });
  await client.connect(transport);
  return {
    client,
    transport,
    stderr: () => err,
    request: async (args) => {
      const result = await client.callTool({ name: "request", arguments: args });
      const content = result.content as { type: string; text: string }[];
      return {
        sc: result.structuredContent as Record<string, unknown>,
        isError: result.isError === true,
        text: content.map((c) => c.text).join(""),
      };
    },
    [Symbol.asyncDispose]: async () => {
      await client.close();
    },
  };
}
