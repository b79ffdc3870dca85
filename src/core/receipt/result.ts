// What params_sha256 and result_sha256 cover, in one place for the desk (which hashes) and every
// verifier (which re-hashes), so both sides agree byte for byte.
import { hashJson } from "./hash.ts";

/** Where an MCP tools/call result carries its receipt envelope: `_meta["io.ask-only/receipt"]`. */
export const MCP_RECEIPT_META_KEY = "io.ask-only/receipt";

/**
 * The result as hashed: a tools/call result without `_meta["io.ask-only/receipt"]`, and without
 * `_meta` at all when that entry was its only key. Anything else (REST results without the
 * entry, arrays, primitives) comes back unchanged. The input is never modified.
 */
export function resultForHashing(result: unknown): unknown {
  if (typeof result !== "object" || result === null || Array.isArray(result)) return result;
  const meta = (result as { _meta?: unknown })._meta;
  if (typeof meta !== "object" || meta === null || Array.isArray(meta) || !Object.hasOwn(meta, MCP_RECEIPT_META_KEY)) {
    return result;
  }
  const { [MCP_RECEIPT_META_KEY]: _receipt, ...restMeta } = meta as Record<string, unknown>;
  const { _meta: _dropped, ...rest } = result as Record<string, unknown>;
  return Object.keys(restMeta).length === 0 ? rest : { ...rest, _meta: restMeta };
}

/** result_sha256 of a returned result (REST `result`, or the whole MCP tools/call result). */
export function resultSha256(result: unknown): string {
  return hashJson(resultForHashing(result));
}

/** params_sha256 of a call's arguments object, as received. */
export function paramsSha256(args: unknown): string {
  return hashJson(args);
}

/**
 * The MCP tools/call result as sent: `result` with the envelope at
 * `_meta["io.ask-only/receipt"]`, replacing any entry of that name the upstream put there (so an
 * upstream cannot slip its own "receipt" to the agent). Other `_meta` entries are kept. Hash
 * first with resultSha256(result): it ignores that entry, so the hash still matches.
 */
export function withReceipt<T extends object>(result: T, envelope: unknown): Omit<T, "_meta"> & { _meta: Record<string, unknown> } {
  const meta = (result as { _meta?: unknown })._meta;
  const kept = typeof meta === "object" && meta !== null && !Array.isArray(meta) ? (meta as Record<string, unknown>) : {};
  return { ...result, _meta: { ...kept, [MCP_RECEIPT_META_KEY]: envelope } };
}
