// The sandbox's faces: the operator's GET, PUT and DELETE /admin/sandbox, and the public POST
// /v1/sandbox/keys (no auth). What a sandbox key is, and its limits, is the domain's
// (core/desk/sandbox.ts); here are the request fields and the caller's address.
import type { Desk } from "../../core/desk/desk.ts";
import type { SandboxSettings } from "../../core/desk/records.ts";
import type { SandboxView } from "../../core/desk/wire.ts";
import { SANDBOX_MAX_BUDGET_MC, SANDBOX_MAX_KEYS_PER_DAY, SANDBOX_MAX_TOOLS, SANDBOX_MAX_TTL_S, SANDBOX_MIN_TTL_S } from "../../core/desk/sandbox.ts";
import { intIn, objectBody, onlyFields, optional, required } from "./request.ts";

/** What Bun.serve passes as the second argument of `fetch`: only the peer address is read. */
export type PeerSource = { requestIP(req: Request): { address: string } | null };

function view(s: SandboxSettings | null): SandboxView {
  if (s === null) return { enabled: false };
  return {
    enabled: true,
    tools: s.tools,
    budget_mc: s.budgetMc,
    ttl_s: s.ttlS,
    keys_per_day: s.keysPerDay,
    updated_at: new Date(s.updatedAt).toISOString(),
  };
}

/** GET /admin/sandbox. */
export async function sandboxView(desk: Desk): Promise<Response> {
  return Response.json(view(await desk.sandbox()));
}

/** DELETE /admin/sandbox. */
export async function clearSandbox(desk: Desk): Promise<Response> {
  await desk.clearSandbox();
  return Response.json(view(null));
}

/** PUT /admin/sandbox. */
export async function setSandbox(desk: Desk, req: Request): Promise<Response> {
  const body = await objectBody(req);
  onlyFields(body, ["tools", "budget_mc", "ttl_s", "keys_per_day"]);
  const tools = required(body, "tools", (v) =>
    Array.isArray(v) && v.length >= 1 && v.length <= SANDBOX_MAX_TOOLS && new Set(v).size === v.length && v.every((t) => typeof t === "string")
      ? (v as string[])
      : undefined,
  );
  const settings = await desk.setSandbox({
    tools,
    budgetMc: optional(body, "budget_mc", intIn(0, SANDBOX_MAX_BUDGET_MC)),
    ttlS: optional(body, "ttl_s", intIn(SANDBOX_MIN_TTL_S, SANDBOX_MAX_TTL_S)),
    keysPerDay: optional(body, "keys_per_day", intIn(1, SANDBOX_MAX_KEYS_PER_DAY)),
  });
  return Response.json(view(settings));
}

/**
 * The caller's address. From the socket; behind `--trust-proxy`, the rightmost X-Forwarded-For
 * entry instead: the one the trusted proxy appended (entries to its left are whatever the client
 * sent, so trusting the leftmost would let a client pick its own network).
 */
function callerAddress(req: Request, peer: PeerSource | undefined, trustProxy: boolean): string | null {
  if (trustProxy) {
    const forwarded = req.headers.get("x-forwarded-for");
    if (forwarded === null) return null;
    const entries = forwarded.split(",").map((s) => s.trim());
    const last = entries[entries.length - 1];
    return last === undefined || last === "" ? null : last;
  }
  return peer?.requestIP(req)?.address ?? null;
}

/** POST /v1/sandbox/keys: no auth; a small key that expires by itself. */
export async function sandboxKey(desk: Desk, req: Request, peer: PeerSource | undefined, trustProxy: boolean): Promise<Response> {
  const k = await desk.grantSandboxKey(callerAddress(req, peer, trustProxy));
  return Response.json(
    { key_id: k.keyId, secret: k.secret, expires_at: new Date(k.expiresAt).toISOString(), budget_mc: k.budgetMc, allow: k.allow },
    { status: 201, headers: { "cache-control": "no-store" } },
  );
}
