// `ask-only serve-mcp`: an MCP server on stdio for an agent. stdout carries JSON-RPC only;
// every log line goes to stderr and names codes, never agent text or the approver's answers.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { failure, info, type Streams } from "../../cli/voice.ts";
import { loadTlsFiles, TlsLoadError } from "../../core/tls/load.ts";
import { ApproverClient } from "./approver-client.ts";
import { resolveServeMcpConfig } from "./config.ts";
import { callRequestTool, failureResult, TOOL_DEFINITION, TOOL_NAME } from "./tool.ts";

const INSTRUCTIONS =
  'One tool, "request": ask a person to pay or to create an account, and read the state of the ask. A person decides; "pending" and "denied" are normal answers.';

export async function runServeMcp(options: { version: string; streams: Streams }): Promise<void> {
  const config = resolveServeMcpConfig(process.env);
  let tls: ReturnType<typeof loadTlsFiles>;
  try {
    tls = loadTlsFiles(config.tls, { side: "client", labels: config.labels, now: new Date(), cwd: process.cwd() });
  } catch (err) {
    if (err instanceof TlsLoadError) throw failure(err.message, err.hint);
    throw err;
  }
  const approver = new ApproverClient({
    baseUrl: config.url,
    tls: { cert: tls.cert, key: tls.key, ca: tls.ca },
    timeoutMs: config.timeoutMs,
  });

  // The low-level Server, not McpServer.registerTool: the tool's input schema is our own flat
  // JSON Schema and its parse our own (errors as codes), which registerTool (zod) cannot express.
  const server = new Server(
    { name: "ask-only", title: "ask-only", version: options.version },
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [TOOL_DEFINITION] }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name !== TOOL_NAME) return failureResult("TOOL_UNKNOWN");
    const result = await callRequestTool(request.params.arguments ?? {}, approver);
    const code = result.isError ? result.structuredContent.error : undefined;
    if (typeof code === "string" && code.startsWith("APPROVER_")) info(options.streams, `serve-mcp: approver exchange failed: ${code}`);
    return result;
  });

  const { promise: closed, resolve: onClosed } = Promise.withResolvers<void>();
  const transport = new StdioServerTransport();
  transport.onclose = () => onClosed();
  await server.connect(transport);
  info(options.streams, `serve-mcp ready on stdio; approver ${config.url.origin}`);

  // The client went away (stdin closed) or asked us to stop: close and leave.
  const close = () => void server.close().catch(() => onClosed());
  process.stdin.once("end", close);
  process.once("SIGTERM", close);
  process.once("SIGINT", close);
  await closed;
  process.off("SIGTERM", close);
  process.off("SIGINT", close);
}
