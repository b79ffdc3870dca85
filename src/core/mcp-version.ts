// What our MCP faces answer a client that asks for a protocol revision they do not speak: the
// 2026-07-28 revision's `server/discover` probe, or (over HTTP) an MCP-Protocol-Version header
// naming another revision. The answer is that revision's own refusal, JSON-RPC error -32022
// (UnsupportedProtocolVersion) whose data lists the versions we speak: a client that can fall
// back runs the 2025 `initialize` handshake; one pinned to a newer revision stops with an error
// that names our versions, instead of a bare "method not found" or a hang.

export const DISCOVER_METHOD = "server/discover";
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;
/** Where a 2026-07-28 request carries its revision (params._meta). */
const PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion";

export type JsonRpcErrorFields = { code: number; message: string; data: { supported: string[]; requested?: string } };

/** A revision as the client named it, echoed only when it has the form of one (YYYY-MM-DD). */
function revision(value: unknown): string | undefined {
  return typeof value === "string" && /^\d{4}-\d{2}-\d{2}$/.test(value) ? value : undefined;
}

/** The -32022 error for a client that asked for `requested` (when it named one). */
export function unsupportedVersion(requested: unknown, supported: readonly string[]): JsonRpcErrorFields {
  const named = revision(requested);
  return {
    code: UNSUPPORTED_PROTOCOL_VERSION,
    message: `Unsupported protocol version${named ? ` ${named}` : ""}: this server speaks ${supported.join(", ")}`,
    data: { supported: [...supported], ...(named ? { requested: named } : {}) },
  };
}

/** The refusal of a request for a method no handler serves: -32022 for the discovery probe, else undefined. */
export function newerRevisionProbe(method: string, params: unknown, supported: readonly string[]): JsonRpcErrorFields | undefined {
  if (method !== DISCOVER_METHOD) return undefined;
  const meta = (params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  return unsupportedVersion(meta?.[PROTOCOL_VERSION_META_KEY], supported);
}

/** Whether an MCP-Protocol-Version header names a version we do not speak (absent: the transport's default). */
export function headerAsksOtherVersion(header: string | null, supported: readonly string[]): boolean {
  return header !== null && !supported.includes(header);
}
