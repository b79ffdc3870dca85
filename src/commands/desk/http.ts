// The desk's HTTP surface as one `fetch(Request) → Response` function: the agents' REST API,
// the public JWKS and the operator API. Tests call it in-process; the binary serves it.
import type { Desk } from "../../core/desk/desk.ts";
import { type ClearingOutcome, unrecorded } from "../../core/desk/outcomes.ts";
import { bearerOf, constantTimeEqual, sha256 } from "../../core/desk/secrets.ts";
import { type ErrorCode, errorResponse, WireError } from "../../core/errors.ts";
import type { Envelope } from "../../core/receipt/index.ts";
import { adminRoutes } from "./admin.ts";
import { MCP_PATH, mcpEndpoint } from "./mcp.ts";
import { MAX_BODY_BYTES, pathSegment, readJson, timestamp } from "./request.ts";
import { type PeerSource, sandboxKey } from "./sandbox.ts";
import { siteCheck } from "./site-check.ts";


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
};

/** Bun.serve's server as `fetch` receives it: its port (Host check) and peer addresses (sandbox). */
export type ServerInfo = PeerSource & { readonly port?: number | undefined };

export type Handler = (req: Request, server?: ServerInfo) => Promise<Response>;


export function createHandler(desk: Desk, options: HandlerOptions): Handler {
  const admin = adminRoutes(desk);
  // Hashes compared in constant time: response timing tells nothing about a guessed token.
  const isAdmin = (req: Request) => {
    const token = bearer(req);
    return token !== null && constantTimeEqual(sha256(token), options.adminTokenSha256);
  };

  const mcp = mcpEndpoint(desk, { ...options, maxBodyBytes: MAX_BODY_BYTES });
  const ourSite = siteCheck(options);

  return async (req, server) => {
    const url = new URL(req.url);
    const path = url.pathname;
    try {
      // Before the key is read, before the sandbox counts anything (site-check.ts).
      if ((path === MCP_PATH || path === "/v1/sandbox/keys") && !ourSite(req, server)) return errorResponse("HOST_REFUSED");
      if (path === MCP_PATH) return await mcp(req);
      if (path === "/v1/sandbox/keys") {
        if (req.method !== "POST") throw new WireError("NOT_FOUND");
        return await sandboxKey(desk, req, server, options.trustProxy === true);
      }
      // Every /v1/tools/… answer carries the clearing headers, an empty tool name too.
      if (path.startsWith("/v1/tools/")) {
        if (req.method !== "POST") throw new WireError("NOT_FOUND");
        return await toolCall(desk, req, pathSegment(path.slice("/v1/tools/".length)), options);
      }
      if (req.method === "GET" && path === "/.well-known/receipt-signing-key.json") {
        // no-cache: right after a rotation, a cached key set would fail the new receipts.
        return Response.json(await desk.jwks(), { headers: { "cache-control": "no-cache" } });
      }
      if (req.method === "GET" && path === "/v1/tools") return await agentTools(desk, req);
      if (req.method === "GET" && path === "/v1/key") return await agentKey(desk, req);
      if (req.method === "GET" && path === "/v1/receipts") return await agentReceipts(desk, req, url);
      if (req.method === "GET" && path.startsWith("/v1/receipts/") && path.endsWith("/result")) {
        return await heldResult(desk, req, pathSegment(path.slice("/v1/receipts/".length, -"/result".length)));
      }
      if (req.method === "GET" && path.startsWith("/v1/receipts/")) {
        return await receiptById(desk, req, pathSegment(path.slice("/v1/receipts/".length)), isAdmin(req));
      }
      if (path === "/admin" || path.startsWith("/admin/")) {
        if (!isAdmin(req)) return errorResponse("ADMIN_TOKEN_INVALID");
        return await admin(req, url);
      }
      return errorResponse("NOT_FOUND");
    } catch (err) {
      const internal = !(err instanceof WireError);
      if (internal) options.onInternal?.(err);
      const code: ErrorCode = internal ? "INTERNAL" : err.code;
      return errorResponse(code, path.startsWith("/v1/tools/") ? clearingHeaders(unrecorded(code)) : undefined, internal ? undefined : err.detail);
    }
  };
}


const bearer = (req: Request) => bearerOf(req.headers.get("authorization"));


function clearingHeaders(o: ClearingOutcome): Record<string, string> {
  const headers: Record<string, string> = {
    "x-clearing-outcome": o.outcome,
    "x-clearing-price-mc": String(o.priceMc),
    "x-clearing-remaining-mc": String(o.remainingMc ?? 0),
  };
  if (o.receipt) headers["x-clearing-receipt-id"] = o.receipt.receipt.id;
  return headers;
}

async function toolCall(desk: Desk, req: Request, tool: string, options: HandlerOptions): Promise<Response> {
  let args: unknown;
  try {
    args = await readJson(req);
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
    return err.response(clearingHeaders(unrecorded(err.code)));
  }
  let o: ClearingOutcome;
  try {
    o = await desk.clear(bearer(req), tool, args, req.signal);
  } catch (err) {
    // A fault of the desk (the ledger unavailable, say): a reservation it left open is refunded
    // by the sweep; the agent still gets the clearing headers.
    options.onInternal?.(err);
    o = unrecorded("INTERNAL");
  }
  const headers = clearingHeaders(o);
  if (o.status === 200) return Response.json({ result: o.result, receipt: o.receipt }, { headers });
  const body: { error: ErrorCode; problems?: unknown; receipt?: Envelope } = { error: o.error! };
  if (o.problems) body.problems = o.problems;
  if (o.receipt) body.receipt = o.receipt;
  return Response.json(body, { status: o.status, headers });
}

function agentKeyOf(desk: Desk, req: Request) {
  return desk.validKey(bearer(req));
}

async function agentTools(desk: Desk, req: Request): Promise<Response> {
  const key = await agentKeyOf(desk, req);
  if (key === null) return errorResponse("KEY_INVALID");
  const tools = desk.allowedTools(key).map(({ tool, priceMc }) => ({
    name: tool.name,
    description: tool.description,
    price_mc: priceMc,
    input_schema: tool.inputSchema,
    // What the upstream declared of the answer and the tool's behaviour (null when it did not).
    output_schema: tool.listing.outputSchema ?? null,
    annotations: tool.listing.annotations ?? null,
  }));
  return Response.json({ tools });
}

async function agentKey(desk: Desk, req: Request): Promise<Response> {
  const key = await agentKeyOf(desk, req);
  if (key === null) return errorResponse("KEY_INVALID");
  const budget = desk.budgetOf(key);
  return Response.json({
    key_id: key.id,
    org_id: key.orgId,
    budget_mc: key.budgetMc,
    spent_mc: budget.spentMc,
    remaining_mc: budget.remainingMc,
    reset: key.reset,
    period: budget.period,
  });
}

/** A receipt is visible to keys of its own organization, and to the operator. */
async function receiptById(desk: Desk, req: Request, id: string, admin: boolean): Promise<Response> {
  const reader = admin ? "operator" : await agentKeyOf(desk, req);
  if (reader === null) return errorResponse("KEY_INVALID");
  const receipt = await desk.receiptFor(id, reader);
  if (receipt === null) return errorResponse("RECEIPT_UNKNOWN");
  return new Response(receipt.envelope, { headers: { "content-type": "application/json" } });
}

/** Receipts an agent's key may list at once (GET /v1/receipts). */
const MAX_LISTED_RECEIPTS = 1000;

/**
 * GET /v1/receipts?since=&limit=: the calling key's own receipts, in chain order, so an agent
 * that lost its connection mid-call finds the receipt of what it was charged for, and which of
 * them hold a result it can still fetch.
 */
async function agentReceipts(desk: Desk, req: Request, url: URL): Promise<Response> {
  const key = await agentKeyOf(desk, req);
  if (key === null) return errorResponse("KEY_INVALID");
  const sinceText = url.searchParams.get("since");
  const since = sinceText === null ? 0 : timestamp(sinceText);
  if (since === undefined || since === null) throw new WireError("VALUE_INVALID", { field: "since" });
  const limitText = url.searchParams.get("limit");
  const limit = limitText === null ? 100 : Number(limitText);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LISTED_RECEIPTS) throw new WireError("VALUE_INVALID", { field: "limit" });
  const { receipts, held } = await desk.keyReceipts(key, since, limit);
  return Response.json({ receipts: receipts.map((r) => JSON.parse(r.envelope) as Envelope), held_results: receipts.filter((r) => held.has(r.id)).map((r) => r.id) });
}

/**
 * GET /v1/receipts/{id}/result: the result of a charged call whose agent disconnected before
 * the answer, for the key that paid, as the success body would have carried it.
 */
async function heldResult(desk: Desk, req: Request, id: string): Promise<Response> {
  const key = await agentKeyOf(desk, req);
  if (key === null) return errorResponse("KEY_INVALID");
  const held = await desk.heldResultFor(key, id);
  if (held === null) return errorResponse("RESULT_UNKNOWN");
  return Response.json(held);
}
