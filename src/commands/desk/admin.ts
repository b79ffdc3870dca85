// The operator API under /admin, as route-table entries (http.ts checks the admin token first).
// Bodies are strict: an unknown field is FIELD_UNKNOWN, a missing one FIELD_MISSING, a bad value
// VALUE_INVALID. Secrets leave once (a new key's secret) and credential headers never do.
import type { Desk } from "../../core/desk/desk.ts";
import { RESETS, type Reset } from "../../core/desk/period.ts";
import type { AuditEntry, DeskKey, Org, ToolRecord } from "../../core/desk/records.ts";
import type { AuditView, CreatedOrgView, KeySecretView, KeyView, OrgView, ToolView } from "../../core/desk/wire.ts";
import type { Route } from "../../core/http/routes.ts";
import type { RequestExtra } from "./http.ts";
import { type Body, fail, intIn, objectBody as body, onlyFields, optional, required, thresholdList, timestamp } from "./request.ts";
import { alertRoutes } from "./alerts.ts";
import { orgBudgetRoutes } from "./org-budgets.ts";
import { clearSandbox, sandboxView, setSandbox } from "./sandbox.ts";
import { addUpstream, listUpstreams, refreshUpstream, replaceAuth } from "./upstreams.ts";

/** The largest budget or price: stays an exact integer through JSON and SQLite. */
const MAX_MC = Number.MAX_SAFE_INTEGER;

/** The /admin routes (http.ts puts the admin-token guard on each). */
export function adminRoutes(desk: Desk, options: { exportIdleMs?: number } = {}): Route<RequestExtra>[] {
  return [
    { method: "POST", path: "/admin/orgs", handle: async (req) => createOrg(desk, await body(req)) },
    { method: "GET", path: "/admin/orgs", handle: async () => Response.json((await desk.orgs()).map(orgView)) },
    ...orgBudgetRoutes(desk),
    ...alertRoutes(desk),
    { method: "POST", path: "/admin/upstreams", handle: (req) => addUpstream(desk, req) },
    { method: "GET", path: "/admin/upstreams", handle: () => listUpstreams(desk) },
    { method: "POST", path: "/admin/upstreams/:name/refresh", handle: (_req, p) => refreshUpstream(desk, p.name!) },
    { method: "PUT", path: "/admin/upstreams/:name/auth", handle: (req, p) => replaceAuth(desk, p.name!, req) },
    { method: "GET", path: "/admin/tools", handle: async () => Response.json((await desk.toolRecords()).map(toolView)) },
    { method: "PUT", path: "/admin/tools/:name", handle: async (req, p) => priceTool(desk, p.name!, await body(req)) },
    { method: "POST", path: "/admin/keys", handle: async (req) => createKey(desk, await body(req)) },
    { method: "GET", path: "/admin/keys", handle: (_req, _p, x) => listKeys(desk, x.query) },
    { method: "GET", path: "/admin/keys/:id", handle: async (_req, p) => Response.json(keyView(desk, await desk.key(p.id!))) },
    { method: "PATCH", path: "/admin/keys/:id", handle: async (req, p) => patchKey(desk, p.id!, await body(req)) },
    { method: "POST", path: "/admin/keys/:id/rotate", handle: (_req, p) => rotateKey(desk, p.id!) },
    { method: "POST", path: "/admin/keys/:id/revoke", handle: (_req, p) => revokeKey(desk, p.id!) },
    { method: "GET", path: "/admin/audit", handle: (_req, _p, x) => audit(desk, x.query) },
    { method: "GET", path: "/admin/receipts", handle: (req, _p, x) => exportReceipts(desk, req, x.query, options.exportIdleMs ?? EXPORT_IDLE_MS) },
    { method: "GET", path: "/admin/sandbox", handle: () => sandboxView(desk) },
    { method: "PUT", path: "/admin/sandbox", handle: (req) => setSandbox(desk, req) },
    { method: "DELETE", path: "/admin/sandbox", handle: () => clearSandbox(desk) },
    {
      method: "POST",
      path: "/admin/signing-key/rotate",
      handle: async () => {
        const { kid, retiredKid } = await desk.rotateSigner();
        return Response.json({ kid, retired_kid: retiredKid });
      },
    },
  ];
}

const iso = (ms: number) => new Date(ms).toISOString();
const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms));

export const orgView = (o: Org): OrgView => ({ org_id: o.id, name: o.name, created_at: iso(o.createdAt) });

const shortText = (max: number) => (v: unknown) => (typeof v === "string" && v.length >= 1 && v.length <= max && v.isWellFormed() ? v : undefined);
const money = intIn(0, MAX_MC);
/** A key's approval threshold: millicents, or null for "never waits for a person". */
const threshold = (v: unknown) => (v === null ? null : money(v));
const toolList = (v: unknown) =>
  Array.isArray(v) && v.length <= 1000 && v.every((t) => typeof t === "string" && t.length >= 1 && t.length <= 200) ? [...new Set(v as string[])] : undefined;
const priceMap = (v: unknown) => {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length > 1000 || !entries.every(([k, p]) => k.length >= 1 && k.length <= 200 && money(p) !== undefined)) return undefined;
  return Object.fromEntries(entries) as Record<string, number>;
};

async function createOrg(desk: Desk, b: Body): Promise<Response> {
  onlyFields(b, ["name"]);
  const org = await desk.createOrg(required(b, "name", shortText(200)));
  return Response.json({ org_id: org.id, name: org.name } satisfies CreatedOrgView, { status: 201 });
}

function toolView(t: ToolRecord): ToolView {
  return {
    name: t.name,
    upstream: t.upstream,
    description: t.description,
    price_mc: t.priceMc,
    upstream_cost_mc: t.upstreamCostMc,
    active: t.active,
    input_schema: t.inputSchema,
  };
}

async function priceTool(desk: Desk, name: string, b: Body): Promise<Response> {
  onlyFields(b, ["price_mc", "upstream_cost_mc"]);
  const price = required(b, "price_mc", money);
  const cost = required(b, "upstream_cost_mc", money);
  return Response.json(toolView(await desk.priceTool(name, price, cost)));
}

function keyView(desk: Desk, k: DeskKey): KeyView {
  const budget = desk.budgetOf(k);
  return {
    key_id: k.id,
    org_id: k.orgId,
    name: k.name,
    budget_mc: k.budgetMc,
    spent_mc: budget.spentMc,
    remaining_mc: budget.remainingMc,
    reset: k.reset,
    period: budget.period,
    allow: k.allow,
    prices: k.prices,
    expires_at: isoOrNull(k.expiresAt),
    revoked_at: isoOrNull(k.revokedAt),
    created_at: iso(k.createdAt),
    alert_thresholds: k.alertThresholds,
    approve_above_mc: k.approveAboveMc,
  };
}

async function createKey(desk: Desk, b: Body): Promise<Response> {
  onlyFields(b, ["org_id", "name", "budget_mc", "reset", "allow", "prices", "expires_at", "alert_thresholds", "approve_above_mc"]);
  const orgId = required(b, "org_id", shortText(64));
  const budgetMc = required(b, "budget_mc", money);
  const reset = required(b, "reset", (v) => (RESETS.includes(v as Reset) ? (v as Reset) : undefined));
  const allow = required(b, "allow", toolList);
  const name = optional(b, "name", shortText(200)) ?? "";
  const prices = optional(b, "prices", priceMap) ?? {};
  const expiresAt = optional(b, "expires_at", timestamp) ?? null;
  const alertThresholds = optional(b, "alert_thresholds", thresholdList);
  const approveAboveMc = optional(b, "approve_above_mc", threshold) ?? null;
  const { keyId, secret } = await desk.createKey({ orgId, name, budgetMc, reset, allow, prices, expiresAt, alertThresholds, approveAboveMc });
  return Response.json({ key_id: keyId, secret } satisfies KeySecretView, { status: 201, headers: { "cache-control": "no-store" } });
}

async function listKeys(desk: Desk, query: URLSearchParams): Promise<Response> {
  const keys = await desk.keys(query.get("org_id"));
  return Response.json(keys.map((k) => keyView(desk, k)));
}

async function patchKey(desk: Desk, id: string, b: Body): Promise<Response> {
  // reset is fixed at creation: moving a key between period kinds mid-period has no safe answer.
  onlyFields(b, ["name", "budget_mc", "allow", "prices", "expires_at", "alert_thresholds", "approve_above_mc"]);
  const patch = {
    name: optional(b, "name", shortText(200)),
    budgetMc: optional(b, "budget_mc", money),
    allow: optional(b, "allow", toolList),
    prices: optional(b, "prices", priceMap),
    expiresAt: optional(b, "expires_at", timestamp),
    alertThresholds: optional(b, "alert_thresholds", thresholdList),
    approveAboveMc: optional(b, "approve_above_mc", threshold),
  };
  return Response.json(keyView(desk, await desk.patchKey(id, patch)));
}

async function rotateKey(desk: Desk, id: string): Promise<Response> {
  const secret = await desk.rotateKey(id);
  return Response.json({ key_id: id, secret } satisfies KeySecretView, { headers: { "cache-control": "no-store" } });
}

async function revokeKey(desk: Desk, id: string): Promise<Response> {
  return Response.json(keyView(desk, await desk.revokeKey(id)));
}

function sinceParam(query: URLSearchParams): number | null {
  const since = query.get("since");
  if (since === null) return null;
  const ms = timestamp(since);
  if (ms === undefined || ms === null) fail("VALUE_INVALID", { field: "since" });
  return ms;
}

function auditView(a: AuditEntry): AuditView {
  return {
    at: iso(a.at),
    org_id: a.orgId,
    key_id: a.keyId,
    tool: a.tool,
    outcome: a.outcome,
    http_status: a.httpStatus,
    price_mc: a.priceMc,
    upstream_cost_mc: a.upstreamCostMc,
    margin_mc: a.marginMc,
    receipt_id: a.receiptId,
  };
}

async function audit(desk: Desk, query: URLSearchParams): Promise<Response> {
  const limitText = query.get("limit");
  const limit = limitText === null ? 1000 : Number(limitText);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) fail("VALUE_INVALID", { field: "limit" });
  const entries = await desk.audit({ orgId: query.get("org_id"), keyId: query.get("key_id"), sinceMs: sinceParam(query), limit });
  return Response.json(entries.map(auditView));
}

/**
 * A client that takes no chunk for this long ends its export: a reader that stopped reading
 * would otherwise hold one of the places the ledger reads exports in, for as long as its
 * connection stays open.
 */
export const EXPORT_IDLE_MS = 60_000;

// The export streams a chunk per pull: the ledger reads the next only once the client has taken
// the last, so a ledger of any size is exported in bounded memory. The first chunk is read before
// the answer's status, so an export that gets no place is answered 503 EXPORTS_BUSY rather than
// cut off after a 200. Each pull waits for the next turn of the event loop first: a ledger that
// reads on this thread (PostgreSQL, SQLite in memory) resolves a fast reader's pulls in
// microtasks, and chained they would hold every other request until the whole ledger was sent.
async function exportReceipts(desk: Desk, req: Request, query: URLSearchParams, idleMs: number): Promise<Response> {
  const filter = { orgId: query.get("org_id"), sinceMs: sinceParam(query) };
  const chunks = desk.exportReceipts(filter, req.signal)[Symbol.asyncIterator]();
  let held: IteratorResult<Uint8Array> | null;
  try {
    held = await chunks.next();
  } catch (err) {
    // The client went away while its export waited for a place: nobody reads this answer.
    if (req.signal.aborted) return new Response(null, { status: 499 });
    throw err;
  }
  let idle: ReturnType<typeof setTimeout> | undefined;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        clearTimeout(idle);
        await new Promise<void>((resolve) => setImmediate(resolve));
        const chunk = held ?? (await chunks.next());
        held = null;
        if (chunk.done) return controller.close();
        controller.enqueue(chunk.value);
        idle = setTimeout(() => {
          controller.error(new Error("the receipts export's reader took nothing for too long"));
          void chunks.return?.();
        }, idleMs);
        idle.unref();
      },
      async cancel() {
        clearTimeout(idle);
        await chunks.return?.();
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { headers: { "content-type": "application/x-ndjson" } });
}
