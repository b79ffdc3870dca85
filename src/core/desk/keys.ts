// Organizations and agent keys as the operator manages them. A key's secret leaves the desk
// once, at creation or rotation; the ledger keeps its lookup prefix and hash only.
import { WireError } from "../errors.ts";
import type { DeskContext } from "./context.ts";
import { periodOf, type Reset } from "./period.ts";
import { LedgerConflict } from "./ports.ts";
import { type DeskKey, type KeyPatch, type Org, spentIn } from "./records.ts";
import { newId, newKeySecret } from "./secrets.ts";

/** A key's budget as it stands in its current period at `now`. */
export function budgetOf(key: DeskKey, now: number): { period: string; spentMc: number; remainingMc: number } {
  const period = periodOf(key.reset, now);
  const spentMc = spentIn(key, period);
  return { period, spentMc, remainingMc: Math.max(0, key.budgetMc - spentMc) };
}

export async function createOrg(d: DeskContext, name: string): Promise<Org> {
  const org = { id: newId("org"), name, createdAt: d.now() };
  await d.ledger.orgs.create(org);
  return org;
}

export type NewKeyInput = {
  orgId: string;
  name: string;
  budgetMc: number;
  reset: Reset;
  allow: readonly string[];
  prices: Readonly<Record<string, number>>;
  expiresAt: number | null;
  alertThresholds?: readonly number[];
  /** A call priced above this waits for a person (approval.ts); null: never. */
  approveAboveMc?: number | null;
};

/** ORG_UNKNOWN, else the org. */
export async function existingOrg(d: DeskContext, id: string): Promise<Org> {
  return (await d.ledger.orgs.get(id)) ?? wire("ORG_UNKNOWN");
}

/** ORG_UNKNOWN, else the new key's id and its secret (shown this once). */
export async function createKey(d: DeskContext, input: NewKeyInput): Promise<{ keyId: string; secret: string }> {
  if ((await d.ledger.orgs.get(input.orgId)) === null) throw new WireError("ORG_UNKNOWN");
  const now = d.now();
  const id = newId("key");
  const secret = newKeySecret();
  await d.ledger.keys.create({ ...input, id, lookup: secret.lookup, secretSha256: secret.hash, period: periodOf(input.reset, now), now });
  return { keyId: id, secret: secret.secret };
}

/** KEY_UNKNOWN, else the key. */
export async function existingKey(d: DeskContext, id: string): Promise<DeskKey> {
  return (await d.ledger.keys.get(id)) ?? wire("KEY_UNKNOWN");
}

/** The keys of one org (ORG_UNKNOWN when there is none), or of all. */
export async function listKeys(d: DeskContext, orgId: string | null): Promise<DeskKey[]> {
  if (orgId !== null && (await d.ledger.orgs.get(orgId)) === null) throw new WireError("ORG_UNKNOWN");
  return d.ledger.keys.list(orgId);
}

/** KEY_UNKNOWN; VALUE_INVALID (budget_mc) for a budget below what this period already spent. */
export async function patchKey(d: DeskContext, id: string, patch: KeyPatch): Promise<DeskKey> {
  try {
    return await d.ledger.keys.patch(id, patch, d.now());
  } catch (err) {
    if (err instanceof LedgerConflict && err.code === "MISSING") throw new WireError("KEY_UNKNOWN");
    // A budget below what this period already spent would break spent <= budget.
    if (err instanceof LedgerConflict && err.code === "OVER_BUDGET") throw new WireError("VALUE_INVALID", { field: "budget_mc" });
    throw err;
  }
}

/** KEY_UNKNOWN, else the new secret: the old one stops matching at once. */
export async function rotateKey(d: DeskContext, id: string): Promise<string> {
  await existingKey(d, id);
  const secret = newKeySecret();
  await d.ledger.keys.rotate(id, secret.lookup, secret.hash);
  return secret.secret;
}

/** KEY_UNKNOWN, else the key as revoked (a second revocation keeps the first time). */
export async function revokeKey(d: DeskContext, id: string): Promise<DeskKey> {
  await existingKey(d, id);
  await d.ledger.keys.revoke(id, d.now());
  return existingKey(d, id);
}

function wire(code: "KEY_UNKNOWN" | "ORG_UNKNOWN"): never {
  throw new WireError(code);
}
