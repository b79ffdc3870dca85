// Which part of a returned result result_sha256 covers. Pure (no runtime imports) so that the
// operator console bundles the very same rule its in-browser verifier applies.

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
