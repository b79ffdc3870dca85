// The public sandbox: small keys anyone can take to try the desk, each in its own organization,
// expiring by itself, at most SANDBOX_KEYS_PER_DAY per network (IPv4 /24, IPv6 /64) per UTC day.
// Off until the operator turns it on with PUT /admin/sandbox.
import { networkOf } from "../../core/desk/network.ts";
import { periodOf } from "../../core/desk/period.ts";
import { newId, newKeySecret } from "../../core/desk/secrets.ts";
import { clearSandbox, getSandbox, grantSandboxKey, type SandboxSettings, setSandbox } from "../../adapters/sqlite/desk/sandbox.ts";
import type { Desk } from "../../core/desk/desk.ts";
import { fail, intIn, objectBody, onlyFields, optional, required } from "./request.ts";

const SANDBOX_KEYS_PER_DAY = 5;
const SANDBOX_DEFAULT_BUDGET_MC = 2_000;
const SANDBOX_DEFAULT_TTL_S = 3_600;
/** A public key gets at most one dollar: a typo in the operator's budget cannot give away more. */
const SANDBOX_MAX_BUDGET_MC = 100_000;
const SANDBOX_MAX_TTL_S = 86_400;
const SANDBOX_MIN_TTL_S = 60;
const SANDBOX_MAX_TOOLS = 2;
/** Keys per UTC day across all networks, unless the operator says otherwise. */
const SANDBOX_DEFAULT_KEYS_PER_DAY = 200;
const SANDBOX_MAX_KEYS_PER_DAY = 100_000;

/** What Bun.serve passes as the second argument of `fetch`: only the peer address is read. */
export type PeerSource = { requestIP(req: Request): { address: string } | null };

function view(s: SandboxSettings | null) {
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

/** GET, PUT and DELETE /admin/sandbox (the caller already holds the admin token). */
export async function sandboxAdmin(desk: Desk, req: Request): Promise<Response> {
  if (req.method === "GET") return Response.json(view(getSandbox(desk.ledger)));
  if (req.method === "DELETE") {
    clearSandbox(desk.ledger);
    return Response.json(view(null));
  }
  if (req.method !== "PUT") fail("NOT_FOUND");
  const body = await objectBody(req);
  onlyFields(body, ["tools", "budget_mc", "ttl_s", "keys_per_day"]);
  const tools = required(body, "tools", (v) =>
    Array.isArray(v) && v.length >= 1 && v.length <= SANDBOX_MAX_TOOLS && new Set(v).size === v.length && v.every((t) => typeof t === "string")
      ? (v as string[])
      : undefined,
  );
  // Only tools the desk serves now: a sandbox key for a missing tool would only ever be refused.
  for (const t of tools) if (desk.tool(t) === undefined) fail("TOOL_UNKNOWN");
  const budget = optional(body, "budget_mc", intIn(0, SANDBOX_MAX_BUDGET_MC)) ?? SANDBOX_DEFAULT_BUDGET_MC;
  const ttl = optional(body, "ttl_s", intIn(SANDBOX_MIN_TTL_S, SANDBOX_MAX_TTL_S)) ?? SANDBOX_DEFAULT_TTL_S;
  const keysPerDay = optional(body, "keys_per_day", intIn(1, SANDBOX_MAX_KEYS_PER_DAY)) ?? SANDBOX_DEFAULT_KEYS_PER_DAY;
  const settings = { tools, budgetMc: budget, ttlS: ttl, keysPerDay, updatedAt: desk.now() };
  setSandbox(desk.ledger, settings);
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
export function sandboxKey(desk: Desk, req: Request, peer: PeerSource | undefined, trustProxy: boolean): Response {
  const settings = getSandbox(desk.ledger);
  if (settings === null) return fail("SANDBOX_OFF");
  const address = callerAddress(req, peer, trustProxy);
  const network = address === null ? null : networkOf(address);
  if (network === null) return fail("ADDRESS_UNKNOWN");
  const now = desk.now();
  const secret = newKeySecret();
  const keyId = newId("key");
  const orgId = newId("org");
  const expiresAt = now + settings.ttlS * 1000;
  const granted = grantSandboxKey(desk.ledger, {
    day: new Date(now).toISOString().slice(0, 10),
    network,
    limit: SANDBOX_KEYS_PER_DAY,
    dayLimit: settings.keysPerDay,
    org: { id: orgId, name: "sandbox" },
    key: {
      id: keyId,
      orgId,
      name: "sandbox",
      lookup: secret.lookup,
      secretSha256: secret.hash,
      budgetMc: settings.budgetMc,
      reset: "none",
      period: periodOf("none", now),
      allow: settings.tools,
      prices: {},
      expiresAt,
      now,
    },
  });
  if (!granted) return fail("SANDBOX_LIMIT");
  return Response.json(
    { key_id: keyId, secret: secret.secret, expires_at: new Date(expiresAt).toISOString(), budget_mc: settings.budgetMc, allow: settings.tools },
    { status: 201, headers: { "cache-control": "no-store" } },
  );
}
