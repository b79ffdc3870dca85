// The agents' REST API: a paid call (the clearing path, with its x-clearing-* headers), the
// tools a key may call, its budget, its receipts and a result it paid for and did not receive.
// Each endpoint reads the caller's key itself; the routes are in http.ts.
import type { Desk } from "../../core/desk/desk.ts";
import { needsApproval } from "../../core/desk/approval.ts";
import { type ClearingOutcome, unrecorded } from "../../core/desk/outcomes.ts";
import { bearerOf } from "../../core/desk/secrets.ts";
import { type ErrorCode, errorResponse, WireError } from "../../core/errors.ts";
import type { Envelope } from "../../core/receipt/index.ts";
import { readJson, timestamp } from "./request.ts";

const bearer = (req: Request) => bearerOf(req.headers.get("authorization"));

/** The x-clearing-* headers every /v1/tools/… answer carries. */
export function clearingHeaders(o: ClearingOutcome): Record<string, string> {
  const headers: Record<string, string> = {
    "x-clearing-outcome": o.outcome,
    "x-clearing-price-mc": String(o.priceMc),
    "x-clearing-remaining-mc": String(o.remainingMc ?? 0),
  };
  if (o.receipt) headers["x-clearing-receipt-id"] = o.receipt.receipt.id;
  if (o.approval) headers["x-clearing-approval-id"] = o.approval.approvalId;
  return headers;
}

/** What a call that waits for a person adds to its answer: the id to repeat it with, and until when. */
export function pendingFields(o: ClearingOutcome): { approval_id?: string; expires_at?: string } {
  if (o.approval?.expiresAt === undefined) return {};
  return { approval_id: o.approval.approvalId, expires_at: new Date(o.approval.expiresAt).toISOString() };
}

/** POST /v1/tools/{tool}. `onInternal` hears a fault of the desk (answered 500 INTERNAL, with the headers). */
export async function toolCall(desk: Desk, req: Request, tool: string, onInternal: (err: unknown) => void): Promise<Response> {
  let args: unknown;
  try {
    args = await readJson(req);
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
    return err.response(clearingHeaders(unrecorded(err.code)));
  }
  let o: ClearingOutcome;
  try {
    o = await desk.clear(bearer(req), tool, args, { agentGone: req.signal, approvalId: req.headers.get("x-clearing-approval") });
  } catch (err) {
    // A fault of the desk (the ledger unavailable, say): a reservation it left open is refunded
    // by the sweep; the agent still gets the clearing headers.
    onInternal(err);
    o = unrecorded("INTERNAL");
  }
  const headers = clearingHeaders(o);
  if (o.status === 200) return Response.json({ result: o.result, receipt: o.receipt }, { headers });
  const body: { error: ErrorCode; problems?: unknown; receipt?: Envelope; approval_id?: string; expires_at?: string } = {
    error: o.error!,
    ...pendingFields(o),
  };
  if (o.problems) body.problems = o.problems;
  if (o.receipt) body.receipt = o.receipt;
  return Response.json(body, { status: o.status, headers });
}

function agentKeyOf(desk: Desk, req: Request) {
  return desk.validKey(bearer(req));
}

/** GET /v1/tools: the key's allowed tools at its prices. */
export async function agentTools(desk: Desk, req: Request): Promise<Response> {
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
    // Calls of this tool wait for a person on the approver (SPEC 8.3).
    approval_needed: needsApproval(key, priceMc),
  }));
  return Response.json({ tools });
}

/** GET /v1/key: the key's budget in its current period. */
export async function agentKey(desk: Desk, req: Request): Promise<Response> {
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

/** GET /v1/receipts/{id}: a receipt is visible to keys of its own organization, and to the operator. */
export async function receiptById(desk: Desk, req: Request, id: string, admin: boolean): Promise<Response> {
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
export async function agentReceipts(desk: Desk, req: Request, query: URLSearchParams): Promise<Response> {
  const key = await agentKeyOf(desk, req);
  if (key === null) return errorResponse("KEY_INVALID");
  const sinceText = query.get("since");
  const since = sinceText === null ? 0 : timestamp(sinceText);
  if (since === undefined || since === null) throw new WireError("VALUE_INVALID", { field: "since" });
  const limitText = query.get("limit");
  const limit = limitText === null ? 100 : Number(limitText);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LISTED_RECEIPTS) throw new WireError("VALUE_INVALID", { field: "limit" });
  const { receipts, held } = await desk.keyReceipts(key, since, limit);
  return Response.json({
    receipts: receipts.map((r) => JSON.parse(r.envelope) as Envelope),
    held_results: receipts.filter((r) => held.has(r.id)).map((r) => r.id),
  });
}

/**
 * GET /v1/receipts/{id}/result: the result of a charged call whose agent disconnected before
 * the answer, for the key that paid, as the success body would have carried it.
 */
export async function heldResult(desk: Desk, req: Request, id: string): Promise<Response> {
  const key = await agentKeyOf(desk, req);
  if (key === null) return errorResponse("KEY_INVALID");
  const held = await desk.heldResultFor(key, id);
  if (held === null) return errorResponse("RESULT_UNKNOWN");
  return Response.json(held);
}
