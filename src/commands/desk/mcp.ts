// The desk's MCP endpoint (Streamable HTTP, stateless: one SDK server and transport per POST,
// answered as JSON). The key check comes before the transport (the Host and Origin check before
// it, in http.ts: site-check.ts); tools/list shows the key's allowed tools with their prices; tools/call takes the same
// clearing path as REST, and its receipt rides in `_meta["io.ask-only/receipt"]`.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { Protocol } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  McpError,
  RequestSchema,
  ErrorCode as RpcErrorCode,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";
import { needsApproval } from "../../core/desk/approval.ts";
import { type ClearingOutcome, unrecorded } from "../../core/desk/outcomes.ts";
import { bearerOf } from "../../core/desk/secrets.ts";
import { type ErrorCode, errorBody, errorResponse } from "../../core/errors.ts";
import { headerAsksOtherVersion, newerRevisionProbe, unsupportedVersion } from "../../core/mcp-version.ts";
import { formatPrice } from "../../core/money/millicents.ts";
import { withReceipt } from "../../core/receipt/index.ts";
import { pendingFields } from "./agent.ts";
import type { Desk } from "../../core/desk/desk.ts";

export const MCP_PATH = "/mcp";
const WWW_AUTHENTICATE_REALM = 'Bearer realm="ask-only desk"';
const SERVER_INFO = { name: "ask-only-desk", version: "1" };
/**
 * tools/call registered with a loose schema and checked against the strict one in the handler,
 * so a malformed call is answered -32602 (invalid params), not -32603 (a server fault).
 */
const LOOSE_CALL_TOOL = RequestSchema.extend({ method: CallToolRequestSchema.shape.method });

export type McpOptions = {
  /** Largest POST body the transport reads. */
  maxBodyBytes: number;
  onInternal?: (err: unknown) => void;
};

export type McpEndpoint = (req: Request) => Promise<Response>;

/** Idle SDK servers kept for reuse (building one costs ~0.1-0.2 ms; reconnecting ~5 µs). */
const MAX_IDLE_SERVERS = 64;

export function mcpEndpoint(desk: Desk, options: McpOptions): McpEndpoint {
  // Each request has a server of its own while it runs; the key travels with the request (as
  // authInfo), never with the server, so a reused server cannot act for the previous caller.
  const idle: Server[] = [];
  return async (req) => {
    const given = bearerOf(req.headers.get("authorization"));
    if (given === null || (await desk.validKey(given)) === null) {
      const challenge = given === null ? WWW_AUTHENTICATE_REALM : `${WWW_AUTHENTICATE_REALM}, error="invalid_token"`;
      return errorResponse("KEY_INVALID", { "www-authenticate": challenge });
    }
    // Stateless: no session to resume (GET) or end (DELETE).
    if (req.method !== "POST") return errorResponse("METHOD_NOT_ALLOWED", { allow: "POST" });
    // A client of another revision hears which versions this endpoint speaks (-32022, HTTP 400).
    const version = req.headers.get("mcp-protocol-version");
    if (headerAsksOtherVersion(version, SUPPORTED_PROTOCOL_VERSIONS)) {
      return Response.json({ jsonrpc: "2.0", id: null, error: unsupportedVersion(version, SUPPORTED_PROTOCOL_VERSIONS) }, { status: 400 });
    }

    const mcp = idle.pop() ?? buildServer(desk, options);
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
      maxRequestBodySize: options.maxBodyBytes,
    });
    await mcp.connect(transport);
    let reusable = true;
    try {
      // The agent's disconnect travels with the key: a call charged after it keeps its result (GET /v1/receipts/{id}/result).
      return await transport.handleRequest(req, { authInfo: { token: given, clientId: "", scopes: [], extra: { agentGone: req.signal } } });
    } finally {
      // JSON mode: the response is whole by now, so closing cuts nothing in flight.
      await mcp.close().catch(() => {
        reusable = false;
      });
      if (reusable && idle.length < MAX_IDLE_SERVERS) idle.push(mcp);
    }
  };
}

/** The caller's key secret, as the endpoint handed it to the transport after checking it. */
function secretOf(extra: { authInfo?: { token: string } }): string | null {
  return extra.authInfo?.token ?? null;
}

/** The signal of the agent's connection, as the endpoint handed it to the transport. */
function agentGoneOf(extra: { authInfo?: { extra?: Record<string, unknown> } }): AbortSignal | undefined {
  const signal = extra.authInfo?.extra?.agentGone;
  return signal instanceof AbortSignal ? signal : undefined;
}

/** The key under a tools/call's `_meta` that names the approval a repeated call uses (REST: x-clearing-approval). */
export const APPROVAL_META_KEY = "io.ask-only/approval";

/** The approval a tools/call names, or null; anything but a string is passed on as no id (refused APPROVAL_ID_INVALID). */
function approvalOf(params: unknown): string | null {
  const meta = (params as { _meta?: unknown } | undefined)?._meta;
  if (typeof meta !== "object" || meta === null || !Object.hasOwn(meta, APPROVAL_META_KEY)) return null;
  const id = (meta as Record<string, unknown>)[APPROVAL_META_KEY];
  return typeof id === "string" ? id : "";
}

/** An SDK server for the endpoint; every handler reads the caller's key from the request. */
function buildServer(desk: Desk, options: McpOptions): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
    // Read again: a key revoked or changed since the auth check shows what it has now.
    const key = await desk.validKey(secretOf(extra));
    if (key === null) return { tools: [] };
    const tools = desk.allowedTools(key).map(({ tool, priceMc }) => {
      const text = tool.description.trim();
      // The upstream's own fields (title, outputSchema, annotations, _meta) as it listed them.
      return {
        ...tool.listing,
        name: tool.name,
        description: `${text === "" ? "" : `${text} `}${priceSentence(priceMc)}${needsApproval(key, priceMc) ? ` ${APPROVAL_SENTENCE}` : ""}`,
        inputSchema: tool.inputSchema as { type: "object" },
      };
    });
    return { tools };
  });
  server.fallbackRequestHandler = async (request) => {
    const refusal = newerRevisionProbe(request.method, request.params, SUPPORTED_PROTOCOL_VERSIONS);
    throw refusal ? new McpError(refusal.code, refusal.message, refusal.data) : new McpError(RpcErrorCode.MethodNotFound, "Method not found");
  };
  // Registered past the Server's own tools/call wrapper, which re-parses every result with the
  // SDK's schema and so drops the fields it does not know (in content blocks and annotations):
  // the result goes out exactly as the upstream sent it (already checked against that schema by
  // the upstream client) with only our receipt added, which is what result_sha256 binds.
  Protocol.prototype.setRequestHandler.call(server, LOOSE_CALL_TOOL, async (loose, extra) => {
    const parsed = CallToolRequestSchema.safeParse(loose);
    if (!parsed.success) throw new McpError(RpcErrorCode.InvalidParams, "Invalid tools/call request");
    const request = parsed.data;
    const secret = secretOf(extra);
    // SPEC §9: absent arguments are the empty object, for the schema check and params_sha256.
    const args = request.params.arguments ?? {};
    let outcome: ClearingOutcome;
    try {
      outcome = await desk.clear(secret, request.params.name, args, { agentGone: agentGoneOf(extra), approvalId: approvalOf(loose.params) });
    } catch (err) {
      options.onInternal?.(err);
      return refusal(unrecorded("INTERNAL"));
    }
    if (outcome.status === 200 && outcome.result !== undefined && outcome.receipt !== undefined) {
      return withReceipt(outcome.result, outcome.receipt);
    }
    return refusal(outcome);
  });
  return server;
}

/** A refusal as a tool result: the agent's model sees the code and can act on it. */
function refusal(o: ClearingOutcome) {
  const code: ErrorCode = o.error ?? "INTERNAL";
  const structured: Record<string, unknown> = { ...errorBody(code), ...pendingFields(o) };
  if (o.problems) structured.problems = o.problems;
  const result = { isError: true, content: [{ type: "text" as const, text: JSON.stringify(structured) }], structuredContent: structured };
  return o.receipt ? withReceipt(result, o.receipt) : result;
}

/** What an agent's model reads on a tool whose calls wait for a person (SPEC 8.3, 8.12). */
export const APPROVAL_SENTENCE =
  'A person approves each call first: the first answer is the error APPROVAL_PENDING with an approval_id; once approved, repeat the same call with _meta["io.ask-only/approval"] set to that id.';

/** "Price: 1,500 mc (1.5 cents) per call." */
export function priceSentence(value: number): string {
  return `Price: ${formatPrice(value)} per call.`;
}
