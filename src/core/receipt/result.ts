// What params_sha256 and result_sha256 cover, in one place for the desk (which hashes) and every
// verifier (which re-hashes), so both sides agree byte for byte.
import { hashJson } from "./hash.ts";
import { MCP_RECEIPT_META_KEY, resultForHashing, withoutUpstreamReceipt } from "./result-rule.ts";

// The rule itself lives in result-rule.ts (no runtime imports), shared with the console bundle.
export { MCP_RECEIPT_META_KEY, resultForHashing, withoutUpstreamReceipt };

/** result_sha256 of a returned result (REST `result`, or the whole MCP tools/call result). */
export function resultSha256(result: unknown): string {
  return hashJson(resultForHashing(result));
}

/** params_sha256 of a call's arguments object, as received. */
export function paramsSha256(args: unknown): string {
  return hashJson(args);
}

/**
 * An upstream's successful tools/call result made ready to return: the result the agent gets
 * (the upstream's own `_meta["io.ask-only/receipt"]` deleted, see withoutUpstreamReceipt) and its
 * result_sha256. The same hash holds for the REST body's `result` and for the MCP result once
 * withReceipt has set the envelope, since resultForHashing removes exactly what withReceipt adds.
 * Null when the result cannot be bound (a `_meta` that is not an object); throws
 * CanonicalJsonError when it has no canonical form.
 */
export function bindResult(upstream: Record<string, unknown>): { result: Record<string, unknown>; sha256: string } | null {
  const result = withoutUpstreamReceipt(upstream);
  return result === null ? null : { result, sha256: resultSha256(result) };
}

/**
 * The MCP tools/call result as sent: `result` (from bindResult, or a refusal the desk made) with
 * the envelope at `_meta["io.ask-only/receipt"]`; other `_meta` entries are kept.
 */
export function withReceipt<T extends object>(result: T, envelope: unknown): Omit<T, "_meta"> & { _meta: Record<string, unknown> } {
  const meta = (result as { _meta?: unknown })._meta;
  const kept = typeof meta === "object" && meta !== null && !Array.isArray(meta) ? (meta as Record<string, unknown>) : {};
  return { ...result, _meta: { ...kept, [MCP_RECEIPT_META_KEY]: envelope } };
}
