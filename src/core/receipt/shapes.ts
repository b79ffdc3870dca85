// The saved responses a verifier reads, each told apart by its whole set of top-level keys, so
// that no file can be one shape to the reader and another to the checks: a bare envelope with a
// forged `result` beside it is no shape at all, not an envelope whose result check is skipped.
// The exact shapes hold no `_meta` and an MCP result must, so no file matches two of them; every
// file that matches none is refused with what it holds. Pure, so the console bundles it.
import { printable } from "./printable.ts";
import { MCP_RECEIPT_META_KEY } from "./result-rule.ts";

export type Shape =
  /** A desk REST success body: exactly `{result, receipt}`. */
  | { kind: "rest"; envelope: unknown; result: Record<string, unknown> }
  /** A desk REST refusal body: exactly `{error, receipt}`. */
  | { kind: "refusal"; envelope: unknown }
  /** An MCP tools/call result with the envelope at `_meta["io.ask-only/receipt"]`. */
  | { kind: "mcp"; envelope: unknown; result: Record<string, unknown> }
  /** The JSON-RPC response that carried such a result: exactly `{jsonrpc, id, result}`. */
  | { kind: "jsonrpc"; envelope: unknown; result: Record<string, unknown> }
  /** A bare envelope: exactly `{payload, signature, kid, receipt}`. */
  | { kind: "envelope"; envelope: unknown };

/** The approver's decision envelope (core/decision): exactly `{payload, signature, kid, decision}`. */
export const DECISION_ENVELOPE_KEYS = ["payload", "signature", "kid", "decision"] as const;

/** Whether a file is the approver's decision envelope, by its whole set of top-level keys (no receipt shape has `decision`). */
export function isDecisionEnvelope(body: unknown): boolean {
  return isRecord(body) && hasExactly(Object.keys(body), DECISION_ENVELOPE_KEYS);
}

/** What a verifier reads, for a hint line or a page. */
export const SHAPES_READ =
  `a REST body {result, receipt}, a refusal {error, receipt}, an MCP tools/call result with _meta["${MCP_RECEIPT_META_KEY}"], ` +
  "the JSON-RPC response {jsonrpc, id, result} that carried one, or a bare envelope {payload, signature, kid, receipt}";

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const hasExactly = (keys: readonly string[], wanted: readonly string[]) => keys.length === wanted.length && wanted.every((k) => keys.includes(k));

/** At most this many of a file's keys are named when it is refused. */
const KEYS_NAMED = 8;

function keyList(keys: readonly string[]): string {
  if (keys.length === 0) return "none";
  const named = [...keys]
    .sort()
    .slice(0, KEYS_NAMED)
    .map((k) => printable(k))
    .join(", ");
  return keys.length > KEYS_NAMED ? `${named}, ... (${keys.length} keys)` : named;
}

type Read = { shape: Shape } | { refused: string };
const refuse = (refused: string): Read => ({ refused });

/** The shape of a saved response, or why it is none (a sentence naming what the file holds). */
export function readShape(body: unknown): Read {
  if (!isRecord(body)) return refuse(`expected a JSON object, found ${Array.isArray(body) ? "an array" : body === null ? "null" : `a ${typeof body}`}`);
  const keys = Object.keys(body);
  if (Object.hasOwn(body, "_meta")) {
    const read = mcpResult(body, "the MCP result");
    return "result" in read ? { shape: { kind: "mcp", envelope: read.envelope, result: read.result } } : read;
  }
  if (hasExactly(keys, ["result", "receipt"])) {
    const { result, receipt } = body;
    if (!isRecord(result)) return refuse("the REST body's result is not an object");
    // The desk never sends a receipt inside a REST result: two receipts would leave it open which one binds the answer.
    if (isRecord(result._meta) && Object.hasOwn(result._meta, MCP_RECEIPT_META_KEY)) {
      return refuse(`ambiguous: a REST body whose result also holds _meta["${MCP_RECEIPT_META_KEY}"]`);
    }
    return { shape: { kind: "rest", envelope: receipt, result } };
  }
  if (hasExactly(keys, ["error", "receipt"])) {
    if (typeof body.error !== "string") return refuse("the refusal's error is not a string");
    return { shape: { kind: "refusal", envelope: body.receipt } };
  }
  if (hasExactly(keys, ["payload", "signature", "kid", "receipt"])) return { shape: { kind: "envelope", envelope: body } };
  if (hasExactly(keys, DECISION_ENVELOPE_KEYS)) return refuse("an approver's decision record, not a desk receipt: check it with the approver's key set");
  if (Object.hasOwn(body, "jsonrpc")) return jsonRpc(body, keys);
  return refuse(`not a response verify-receipt reads (top-level keys: ${keyList(keys)})`);
}

function jsonRpc(body: Record<string, unknown>, keys: readonly string[]): Read {
  if (body.jsonrpc !== "2.0") return refuse('a JSON-RPC message whose jsonrpc is not "2.0"');
  if (hasExactly(keys, ["jsonrpc", "id", "error"])) return refuse("a JSON-RPC error response: it carries no receipt");
  if (!hasExactly(keys, ["jsonrpc", "id", "result"])) return refuse(`not a JSON-RPC response {jsonrpc, id, result} (top-level keys: ${keyList(keys)})`);
  if (typeof body.id !== "string" && typeof body.id !== "number") return refuse("the JSON-RPC response's id is not a string or a number");
  if (!isRecord(body.result)) return refuse("the JSON-RPC response's result is not an object");
  if (!Object.hasOwn(body.result, "_meta")) return refuse(`the JSON-RPC response's result holds no _meta["${MCP_RECEIPT_META_KEY}"]`);
  const read = mcpResult(body.result, "the JSON-RPC response's result");
  return "result" in read ? { shape: { kind: "jsonrpc", envelope: read.envelope, result: read.result } } : read;
}

/** An object holding `_meta` read as a tools/call result; every key beyond those typed here is result data. */
function mcpResult(result: Record<string, unknown>, where: string): { envelope: unknown; result: Record<string, unknown> } | { refused: string } {
  const meta = result._meta;
  if (!isRecord(meta)) return { refused: `${where}'s _meta is not an object` };
  if (!Object.hasOwn(meta, MCP_RECEIPT_META_KEY)) return { refused: `${where} holds no _meta["${MCP_RECEIPT_META_KEY}"]` };
  if (Object.hasOwn(result, "content") && !Array.isArray(result.content)) return { refused: `${where}'s content is not an array` };
  if (Object.hasOwn(result, "isError") && typeof result.isError !== "boolean") return { refused: `${where}'s isError is not a boolean` };
  if (Object.hasOwn(result, "structuredContent") && !isRecord(result.structuredContent)) return { refused: `${where}'s structuredContent is not an object` };
  return { envelope: meta[MCP_RECEIPT_META_KEY], result };
}
