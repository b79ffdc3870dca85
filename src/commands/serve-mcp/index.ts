// `ask-only serve-mcp`: an MCP server on stdio for an agent. stdout carries JSON-RPC only;
// every log line goes to stderr and names codes, never agent text or the approver's answers.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";
import { failure, info, type Streams } from "../../cli/voice.ts";
import { newerRevisionProbe } from "../../core/mcp-version.ts";
import { loadTlsFiles, TlsLoadError } from "../../core/tls/load.ts";
import type { ApproverLink } from "./approver-client.ts";
import { resolveServeMcpConfig } from "./config.ts";
import { failureResult, type ToolResult, TOOL_DEFINITION, TOOL_NAME } from "./definition.ts";

type CallTool = (args: unknown) => Promise<ToolResult>;

/**
 * The field rules and the approver client load on first use, not at start: initialize and
 * tools/list are answered without them (the rules' schema library is most of start-up time).
 */
function lazyCallTool(link: ApproverLink, limits: { maxAmount: string }): () => Promise<CallTool> {
  let loading: Promise<CallTool> | undefined;
  return () => {
    loading ??= (async () => {
      const [{ callRequestTool }, { ApproverClient }] = await Promise.all([import("./tool.ts"), import("./approver-client.ts")]);
      const approver = new ApproverClient(link);
      return (args: unknown) => callRequestTool(args, approver, limits);
    })();
    return loading;
  };
}

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
  const loadCallTool = lazyCallTool(
    {
      baseUrl: config.url,
      tls: { cert: tls.cert, key: tls.key, ca: tls.ca },
      timeoutMs: config.timeoutMs,
    },
    { maxAmount: config.maxAmount },
  );

  // The low-level Server, not McpServer.registerTool: the tool's input schema is our own flat
  // JSON Schema and its parse our own (errors as codes), which registerTool (zod) cannot express.
  const server = new Server({ name: "ask-only", title: "ask-only", version: options.version }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, () => {
    // A client that lists tools will call one soon: load the rules once this answer is out.
    setTimeout(() => loadCallTool().catch(() => {}), 0);
    return { tools: [TOOL_DEFINITION] };
  });
  // A client of a newer revision probes with server/discover: it gets -32022 naming our versions.
  server.fallbackRequestHandler = async (request) => {
    const refusal = newerRevisionProbe(request.method, request.params, SUPPORTED_PROTOCOL_VERSIONS);
    throw refusal ? new McpError(refusal.code, refusal.message, refusal.data) : new McpError(ErrorCode.MethodNotFound, "Method not found");
  };
  const inFlight = new Set<Promise<unknown>>();
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name !== TOOL_NAME) return failureResult("TOOL_UNKNOWN");
    const call = (async () => (await loadCallTool())(request.params.arguments ?? {}))();
    inFlight.add(call);
    let result: ToolResult;
    try {
      result = await call;
    } catch (err) {
      // A fault of ours: the agent gets the code; the log names the error's class only.
      info(options.streams, `serve-mcp: internal fault (${err instanceof Error ? err.name : "non-error thrown"})`);
      result = failureResult("INTERNAL");
    } finally {
      inFlight.delete(call);
    }
    const code = result.isError ? result.structuredContent.error : undefined;
    if (typeof code === "string" && code.startsWith("APPROVER_")) info(options.streams, `serve-mcp: approver exchange failed: ${code}`);
    return result;
  });

  const { promise: closed, resolve: onClosed } = Promise.withResolvers<void>();
  const transport = new StdioServerTransport();
  transport.onclose = () => onClosed();
  // Answers still being written when stdin closes must reach the client before we leave.
  const sending = new Set<Promise<void>>();
  const send = transport.send.bind(transport);
  transport.send = (message) => {
    const written = send(message);
    sending.add(written);
    void written.finally(() => sending.delete(written)).catch(() => {});
    return written;
  };
  await server.connect(transport);
  info(options.streams, `serve-mcp ready on stdio; approver ${config.url.origin}`);

  // The client closed stdin or we were asked to stop: answer the calls already made, then leave.
  // The SDK sends an answer a few microtasks after its handler settles: one macrotask later every
  // answer of a settled call has been handed to `send`.
  const close = () =>
    void Promise.allSettled([...inFlight])
      .then(() => new Promise((resolve) => setImmediate(resolve)))
      .then(() => Promise.allSettled([...sending]))
      .then(() => server.close())
      .catch(() => onClosed());
  process.stdin.once("end", close);
  process.once("SIGTERM", close);
  process.once("SIGINT", close);
  await closed;
  process.off("SIGTERM", close);
  process.off("SIGINT", close);
}
