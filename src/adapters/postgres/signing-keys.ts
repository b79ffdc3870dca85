// Receipt signing keys of every node. Each node signs with its own key and registers its public
// half here before using it; every node's key set lists every node's keys, current and retired,
// so a receipt from any node verifies with the key set fetched from any node.
import type { SQL } from "bun";
import { toSafe } from "./money.ts";

export type SigningKeyRow = { kid: string; node_id: string; public_jwk: string; created_at: number; retired_at: number | null };

/**
 * Makes `kid` the node's current key, retiring the node's previous one, in one transaction (a
 * node has one current key; the other nodes' keys are untouched). Registering the current key
 * again changes nothing.
 */
export async function registerSigningKey(sql: SQL, nodeId: string, kid: string, publicJwk: string, now: number): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`UPDATE signing_keys SET retired_at = ${BigInt(now)}::bigint WHERE node_id = ${nodeId} AND retired_at IS NULL AND kid <> ${kid}`;
    await tx`
      INSERT INTO signing_keys (kid, node_id, public_jwk, created_at) VALUES (${kid}, ${nodeId}, ${publicJwk}, ${BigInt(now)}::bigint)
      ON CONFLICT (kid) DO NOTHING`;
  });
}

/** Every node's keys: current ones first (newest first), then retired ones (newest first). */
export async function listSigningKeys(sql: SQL): Promise<SigningKeyRow[]> {
  const rows = await sql`
    SELECT kid, node_id, public_jwk, created_at, retired_at FROM signing_keys
     ORDER BY retired_at IS NOT NULL, coalesce(retired_at, created_at) DESC, kid`;
  return rows.map((r: { kid: string; node_id: string; public_jwk: string; created_at: bigint; retired_at: bigint | null }) => ({
    kid: r.kid,
    node_id: r.node_id,
    public_jwk: r.public_jwk,
    created_at: toSafe(r.created_at),
    retired_at: r.retired_at === null ? null : toSafe(r.retired_at),
  }));
}
