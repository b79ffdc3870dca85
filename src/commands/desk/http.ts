// The desk's HTTP surface as one `fetch(Request) → Response` function over one route table: the
// agents' REST API (agent.ts), the MCP endpoint (mcp.ts), the public JWKS, the sandbox
// (sandbox.ts) and the operator API (admin.ts). Tests call it in-process; the binary serves it.
import type { Desk } from "../../core/desk/desk.ts";
import { unrecorded } from "../../core/desk/outcomes.ts";
import { bearerOf, constantTimeEqual, sha256 } from "../../core/desk/secrets.ts";
import { type ErrorCode, errorResponse, WireError } from "../../core/errors.ts";
import { type Route, routeTable, targetOf } from "../../core/http/routes.ts";
import { adminRoutes } from "./admin.ts";
import { agentKey, agentReceipts, agentTools, clearingHeaders, heldResult, receiptById, toolCall } from "./agent.ts";
import { MCP_PATH, mcpEndpoint } from "./mcp.ts";
import { MAX_BODY_BYTES } from "./request.ts";
import { type PeerSource, sandboxKey } from "./sandbox.ts";
import { siteCheck } from "./site-check.ts";
import type { StripeWebhookConfig } from "../../core/finance/stripe-webhook.ts";
import { stripeTopup } from "./stripe.ts";

export type HandlerOptions = {
  /** SHA-256 of the operator's admin token. */
  adminTokenSha256: Uint8Array;
  /** Called with the fault when a request fails on the desk's side (answered INTERNAL). */
  onInternal?: (err: unknown) => void;
  /** The --listen hostname: /mcp and the sandbox accept it as a Host (with loopback names). */
  listenHostname?: string;
  /** More Host values /mcp and the sandbox accept (--allowed-host). */
  allowedHosts?: readonly string[];
  /** Read the sandbox caller's address from X-Forwarded-For (--trust-proxy). */
  trustProxy?: boolean;
  /** POST /v1/topups/stripe's secret and rates (--stripe-webhook-secret-file, --topup-rate); without them the path is 404. */
  stripe?: StripeWebhookConfig | null;
  /** The operator's log (why a webhook was refused). */
  log?: (line: string) => void;
  /** A receipts export whose client takes no chunk for this long ends (admin.ts EXPORT_IDLE_MS). */
  exportIdleMs?: number;
};

/** Bun.serve's server as `fetch` receives it: its port (Host check) and peer addresses (sandbox). */
export type ServerInfo = PeerSource & { readonly port?: number | undefined };

export type Handler = (req: Request, server?: ServerInfo) => Promise<Response>;

/** What every route may read beside the request: the server it came through and the query. */
export type RequestExtra = { server: ServerInfo | undefined; query: URLSearchParams };

/** A path with no answer; on /v1/tools/… it still gets the clearing headers (thrown, for the handler to add them). */
const notFound = (): never => {
  throw new WireError("NOT_FOUND");
};

const TOOLS_PREFIX = "/v1/tools/";
const NO_STORE = { "cache-control": "no-store" };

export function createHandler(desk: Desk, options: HandlerOptions): Handler {
  const onInternal = options.onInternal ?? (() => {});
  const mcp = mcpEndpoint(desk, { ...options, maxBodyBytes: MAX_BODY_BYTES });
  const ourSite = siteCheck(options);
  // Before the key is read, before the sandbox counts anything (site-check.ts).
  const site = (req: Request, x: RequestExtra) => (ourSite(req, x.server) ? null : errorResponse("HOST_REFUSED"));
  // Hashes compared in constant time: response timing tells nothing about a guessed token.
  const isOperator = (req: Request) => {
    const token = bearerOf(req.headers.get("authorization"));
    return token !== null && constantTimeEqual(sha256(token), options.adminTokenSha256);
  };
  const operator = (req: Request) => (isOperator(req) ? null : errorResponse("ADMIN_TOKEN_INVALID"));

  const routes: Route<RequestExtra>[] = [
    { method: "*", path: MCP_PATH, guard: site, handle: (req) => mcp(req) },
    { method: "POST", path: "/v1/sandbox/keys", guard: site, handle: (req, _p, x) => sandboxKey(desk, req, x.server, options.trustProxy === true) },
    { method: "*", path: "/v1/sandbox/keys", guard: site, handle: notFound },
    // An empty tool name too: the clearing path answers it (TOOL_UNKNOWN, with the headers).
    { method: "POST", path: `${TOOLS_PREFIX}*tool`, handle: (req, p) => toolCall(desk, req, p.tool!, onInternal) },
    {
      method: "GET",
      path: "/.well-known/receipt-signing-key.json",
      // no-cache: right after a rotation, a cached key set would fail the new receipts.
      handle: async () => Response.json(await desk.jwks(), { headers: { "cache-control": "no-cache" } }),
    },
    // For load balancers: 200 only while this desk can take calls (its ledger reachable, its lease held).
    {
      method: "GET",
      path: "/healthz",
      handle: async () => ((await desk.healthy()) ? Response.json({ ok: true }, { headers: NO_STORE }) : errorResponse("LEDGER_UNAVAILABLE", NO_STORE)),
    },
    { method: "GET", path: "/v1/tools", handle: (req) => agentTools(desk, req) },
    {
      method: "POST",
      path: "/v1/topups/stripe",
      handle: (req) => (options.stripe ? stripeTopup(desk, req, options.stripe, options.log ?? (() => {})) : notFound()),
    },
    { method: "GET", path: "/v1/key", handle: (req) => agentKey(desk, req) },
    { method: "GET", path: "/v1/receipts", handle: (req, _p, x) => agentReceipts(desk, req, x.query) },
    { method: "GET", path: "/v1/receipts/:id/result", handle: (req, p) => heldResult(desk, req, p.id!) },
    { method: "GET", path: "/v1/receipts/:id", handle: (req, p) => receiptById(desk, req, p.id!, isOperator(req)) },
    ...adminRoutes(desk, { exportIdleMs: options.exportIdleMs }).map((r) => ({ ...r, guard: operator })),
    // Every other path under /admin is the operator's too: a wrong token is told so first.
    { method: "*", path: "/admin", guard: operator, handle: notFound },
    { method: "*", path: "/admin/*rest", guard: operator, handle: notFound },
  ];
  const dispatch = routeTable(routes);

  return async (req, server) => {
    const { path, query } = targetOf(req.url);
    try {
      return (await dispatch(req, path, { server, query })) ?? notFound();
    } catch (err) {
      const internal = !(err instanceof WireError);
      if (internal) onInternal(err);
      const code: ErrorCode = internal ? "INTERNAL" : err.code;
      // Every /v1/tools/… answer carries the clearing headers.
      return errorResponse(code, path.startsWith(TOOLS_PREFIX) ? clearingHeaders(unrecorded(code)) : undefined, internal ? undefined : err.detail);
    }
  };
}
