// The desk's MCP endpoint (Streamable HTTP, stateless: one SDK server and transport per POST,
// answered as JSON). The Host and Origin check and the key check come before the transport;
// tools/list shows the key's allowed tools with their prices; tools/call takes the same
// clearing path as REST, and its receipt rides in `_meta["io.ask-only/receipt"]`.
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  McpError,
  RequestSchema,
  ErrorCode as RpcErrorCode,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";
import { bearerOf } from "../../core/desk/secrets.ts";
import { type ErrorCode, errorBody, errorResponse } from "../../core/errors.ts";
import { headerAsksOtherVersion, newerRevisionProbe, unsupportedVersion } from "../../core/mcp-version.ts";
import { withReceipt } from "../../core/receipt/index.ts";
import { allowedTools, type ClearingOutcome, clear, validKey } from "./clearing.ts";
import type { Desk } from "./desk.ts";

export const MCP_PATH = "/mcp";
const WWW_AUTHENTICATE_REALM = 'Bearer realm="ask-only desk"';
const SERVER_INFO = { name: "ask-only-desk", version: "1" };
/**
 * tools/call registered with a loose schema: the SDK's Server then checks the strict one itself
 * and answers a malformed call with -32602 (invalid params), where the strict schema given here
 * would fail first and be answered -32603, a server fault, for a client's mistake.
 */
const LOOSE_CALL_TOOL = RequestSchema.extend({ method: CallToolRequestSchema.shape.method });

/** What the endpoint needs from Bun.serve's server: the port it really listens on. */
export type ListenInfo = { readonly port?: number | undefined };

export type McpOptions = {
  /** The --listen hostname; a wildcard (0.0.0.0, ::) adds nothing. */
  listenHostname?: string;
  /** More Host values to accept (`name` or `name:port`), from --allowed-host. */
  allowedHosts?: readonly string[];
  /** Largest POST body the transport reads. */
  maxBodyBytes: number;
  onInternal?: (err: unknown) => void;
};

export type McpEndpoint = (req: Request, server: ListenInfo | undefined) => Promise<Response>;

/** Idle SDK servers kept for reuse (building one costs ~0.1-0.2 ms; reconnecting ~5 µs). */
const MAX_IDLE_SERVERS = 64;

export function mcpEndpoint(desk: Desk, options: McpOptions): McpEndpoint {
  const extra = new Set((options.allowedHosts ?? []).map((h) => h.toLowerCase()));
  // Each request has a server of its own while it runs; the key travels with the request (as
  // authInfo), never with the server, so a reused server cannot act for the previous caller.
  const idle: Server[] = [];
  return async (req, server) => {
    // DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends its own
    // Host (and Origin); only the names this desk is reached by pass.
    const defaultPort = new URL(req.url).protocol === "https:" ? 443 : 80;
    const allowed = (hostport: string | null) =>
      hostport !== null && hostAllowed(hostport, defaultPort, server?.port, options.listenHostname, extra);
    if (!allowed(req.headers.get("host")) || !originAllowed(req.headers.get("origin"), allowed)) return errorResponse("HOST_REFUSED");

    const given = bearerOf(req.headers.get("authorization"));
    if (given === null || validKey(desk, given, desk.now()) === null) {
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
      return await transport.handleRequest(req, { authInfo: { token: given, clientId: "", scopes: [] } });
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

/** An SDK server for the endpoint; every handler reads the caller's key from the request. */
function buildServer(desk: Desk, options: McpOptions): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
    // Read again: a key revoked or changed since the auth check shows what it has now.
    const key = validKey(desk, secretOf(extra), desk.now());
    if (key === null) return { tools: [] };
    const tools = allowedTools(desk, key).map(({ tool, priceMc }) => {
      const text = tool.row.description.trim();
      return { name: tool.row.name, description: `${text === "" ? "" : `${text} `}${priceSentence(priceMc)}`, inputSchema: tool.schema as { type: "object" } };
    });
    return { tools };
  });
  server.fallbackRequestHandler = async (request) => {
    const refusal = newerRevisionProbe(request.method, request.params, SUPPORTED_PROTOCOL_VERSIONS);
    throw refusal ? new McpError(refusal.code, refusal.message, refusal.data) : new McpError(RpcErrorCode.MethodNotFound, "Method not found");
  };
  server.setRequestHandler(LOOSE_CALL_TOOL, async (loose, extra) => {
    const request = CallToolRequestSchema.parse(loose);
    const secret = secretOf(extra);
    // SPEC §9: absent arguments are the empty object, for the schema check and params_sha256.
    const args = request.params.arguments ?? {};
    let outcome: ClearingOutcome;
    try {
      outcome = await clear(desk, secret, request.params.name, args);
    } catch (err) {
      options.onInternal?.(err);
      return refusal({ status: 500, outcome: "internal_error", error: "INTERNAL", priceMc: 0, remainingMc: null });
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
  const structured: Record<string, unknown> = { ...errorBody(code) };
  if (o.problems) structured.problems = o.problems;
  const result = { isError: true, content: [{ type: "text" as const, text: JSON.stringify(structured) }], structuredContent: structured };
  return o.receipt ? withReceipt(result, o.receipt) : result;
}

/** "Price: 1,500 mc (1.5 cents) per call." */
export function priceSentence(mc: number): string {
  const group = (n: number) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const whole = Math.floor(mc / 1000);
  const frac = String(mc % 1000).padStart(3, "0").replace(/0+$/, "");
  const cents = frac === "" ? group(whole) : `${group(whole)}.${frac}`;
  return `Price: ${group(mc)} mc (${cents} ${cents === "1" ? "cent" : "cents"}) per call.`;
}

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];
const WILDCARDS = new Set(["0.0.0.0", "::", "[::]", ""]);

/**
 * Whether a Host value (`name[:port]`) is one this desk answers to: a loopback name or the
 * --listen hostname on the port it listens on, or an --allowed-host entry (`name` for any port,
 * `name:port` for that port only).
 */
export function hostAllowed(hostport: string, defaultPort: number, port: number | undefined, listenHostname: string | undefined, extra: ReadonlySet<string>): boolean {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/.exec(hostport.toLowerCase());
  if (m === null) return false;
  const name = m[1]!;
  const given = m[2] === undefined ? defaultPort : Number(m[2]);
  if (extra.has(name) || extra.has(`${name}:${given}`)) return true;
  if (port === undefined || given !== port) return false;
  const listen = listenHostname === undefined ? undefined : listenHostname.includes(":") && !listenHostname.startsWith("[") ? `[${listenHostname}]` : listenHostname;
  return LOOPBACK_NAMES.includes(name) || (listen !== undefined && !WILDCARDS.has(listen) && listen.toLowerCase() === name);
}

/** No Origin (not a browser) passes; otherwise its host must pass the Host rule. */
function originAllowed(origin: string | null, allowed: (hostport: string) => boolean): boolean {
  if (origin === null) return true;
  if (!URL.canParse(origin)) return false;
  const u = new URL(origin);
  if (u.protocol !== "http:" && u.protocol !== "https:") return false;
  const port = u.port === "" ? (u.protocol === "https:" ? "443" : "80") : u.port;
  return allowed(`${u.hostname}:${port}`);
}
