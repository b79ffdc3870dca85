// The public sandbox: small keys anyone can take to try the desk, each in its own organization,
// expiring by itself, at most SANDBOX_KEYS_PER_DAY per network (IPv4 /24, IPv6 /64) per UTC day
// and the operator's keys_per_day across all networks. Off until the operator turns it on.
import { WireError } from "../errors.ts";
import type { DeskContext } from "./context.ts";
import { networkOf } from "./network.ts";
import { periodOf } from "./period.ts";
import type { SandboxSettings } from "./records.ts";
import { newId, newKeySecret } from "./secrets.ts";

export const SANDBOX_KEYS_PER_DAY = 5;
export const SANDBOX_DEFAULT_BUDGET_MC = 2_000;
export const SANDBOX_DEFAULT_TTL_S = 3_600;
/** A public key gets at most one dollar: a typo in the operator's budget cannot give away more. */
export const SANDBOX_MAX_BUDGET_MC = 100_000;
export const SANDBOX_MAX_TTL_S = 86_400;
export const SANDBOX_MIN_TTL_S = 60;
export const SANDBOX_MAX_TOOLS = 2;
/** Keys per UTC day across all networks, unless the operator says otherwise. */
export const SANDBOX_DEFAULT_KEYS_PER_DAY = 200;
export const SANDBOX_MAX_KEYS_PER_DAY = 100_000;

export function sandboxSettings(d: DeskContext): Promise<SandboxSettings | null> {
  return d.ledger.sandbox.settings();
}

/** Turns the sandbox on or changes it (TOOL_UNKNOWN for a tool the desk does not serve now). */
export async function setSandbox(
  d: DeskContext,
  input: { tools: readonly string[]; budgetMc?: number; ttlS?: number; keysPerDay?: number },
): Promise<SandboxSettings> {
  // Only tools the desk serves now: a sandbox key for a missing tool would only ever be refused.
  for (const t of input.tools) if (d.catalog.tool(t) === undefined) throw new WireError("TOOL_UNKNOWN");
  const settings: SandboxSettings = {
    tools: input.tools,
    budgetMc: input.budgetMc ?? SANDBOX_DEFAULT_BUDGET_MC,
    ttlS: input.ttlS ?? SANDBOX_DEFAULT_TTL_S,
    keysPerDay: input.keysPerDay ?? SANDBOX_DEFAULT_KEYS_PER_DAY,
    updatedAt: d.now(),
  };
  await d.ledger.sandbox.set(settings);
  return settings;
}

/** Turns it off; keys handed out run until they expire. */
export async function clearSandbox(d: DeskContext): Promise<void> {
  await d.ledger.sandbox.clear();
}

export type SandboxKey = { keyId: string; secret: string; expiresAt: number; budgetMc: number; allow: readonly string[] };

/**
 * A sandbox key for a caller at `address` (null when it could not be read): SANDBOX_OFF,
 * ADDRESS_UNKNOWN, SANDBOX_LIMIT for a network (or all networks) that had its keys today.
 */
export async function grantSandboxKey(d: DeskContext, address: string | null): Promise<SandboxKey> {
  const settings = await d.ledger.sandbox.settings();
  if (settings === null) throw new WireError("SANDBOX_OFF");
  const network = address === null ? null : networkOf(address);
  if (network === null) throw new WireError("ADDRESS_UNKNOWN");
  const now = d.now();
  const secret = newKeySecret();
  const keyId = newId("key");
  const orgId = newId("org");
  const expiresAt = now + settings.ttlS * 1000;
  const granted = await d.ledger.sandbox.grant({
    day: new Date(now).toISOString().slice(0, 10),
    network,
    limit: SANDBOX_KEYS_PER_DAY,
    dayLimit: settings.keysPerDay,
    org: { id: orgId, name: "sandbox", createdAt: now },
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
      // Nobody stands behind a sandbox key to approve its calls.
      approveAboveMc: null,
      now,
    },
  });
  if (!granted) throw new WireError("SANDBOX_LIMIT");
  return { keyId, secret: secret.secret, expiresAt, budgetMc: settings.budgetMc, allow: settings.tools };
}
