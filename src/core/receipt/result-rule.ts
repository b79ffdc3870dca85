// What result_sha256 covers, in one place for the desk (which hashes what it returns) and every
// verifier (which re-hashes what it was given), so both sides agree byte for byte whatever
// `_meta` holds. Pure (no runtime imports) so that the operator console bundles the very same rule.

/** Where an MCP tools/call result carries its receipt envelope: `_meta["io.ask-only/receipt"]`. */
export const MCP_RECEIPT_META_KEY = "io.ask-only/receipt";

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The result without our receipt, as hashed: `_meta["io.ask-only/receipt"]` removed, then `_meta`
 * removed when it is an empty object (MCP reads an empty `_meta` as none; over MCP the desk always
 * sends a `_meta` holding the receipt, so `{}` and no `_meta` upstream look the same to the agent).
 * Every other key, and every other `_meta` entry, is kept. Anything that is not an object with an
 * object `_meta` comes back unchanged; the input is never modified.
 */
export function resultForHashing(result: unknown): unknown {
  if (!isRecord(result) || !isRecord(result._meta)) return result;
  const { _meta: meta, ...rest } = result;
  const { [MCP_RECEIPT_META_KEY]: _ours, ...others } = meta;
  return Object.keys(others).length === 0 ? rest : { ...rest, _meta: others };
}

/**
 * An upstream's tools/call result as the desk returns it: the upstream's own
 * `_meta["io.ask-only/receipt"]` deleted (only the desk's receipt ever sits there), nothing else
 * changed. Null when `_meta` is there but not an object: the receipt could not be attached beside
 * it, so the desk does not charge for such a result.
 */
export function withoutUpstreamReceipt(result: Record<string, unknown>): Record<string, unknown> | null {
  if (!Object.hasOwn(result, "_meta")) return result;
  const meta = result._meta;
  if (!isRecord(meta)) return null;
  if (!Object.hasOwn(meta, MCP_RECEIPT_META_KEY)) return result;
  const { [MCP_RECEIPT_META_KEY]: _theirs, ...others } = meta;
  return { ...result, _meta: others };
}
