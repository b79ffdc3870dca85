// What params_sha256 and result_sha256 cover, in one place for the desk (which hashes) and every
// verifier (which re-hashes), so both sides agree byte for byte.
import { hashJson } from "./hash.ts";
import { MCP_RECEIPT_META_KEY, resultForHashing } from "./result-rule.ts";

// The rule itself lives in result-rule.ts (no runtime imports), shared with the console bundle.
export { MCP_RECEIPT_META_KEY, resultForHashing };

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
