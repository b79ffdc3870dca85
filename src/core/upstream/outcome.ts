// What an upstream call comes to, whatever speaks to the upstream (MCP or REST): the clearing
// path decides who pays from this alone, so every adapter sorts its failures into these kinds.
import type { RestOperation } from "../rest/operation.ts";

export type CallOutcome =
  | { kind: "ok"; result: Record<string, unknown> }
  /** Transport failure, an HTTP error status, or a protocol error that is not about the input. */
  | { kind: "upstream_error" }
  | { kind: "timeout" }
  /** The upstream refused the input (MCP invalid params; REST 400, 404, 409, 422). */
  | { kind: "args_refused" }
  /** The tool ran and reported a failure (an MCP isError result). */
  | { kind: "tool_failed" }
  /**
   * The operator's credential failed: the upstream answered 401 or 403 (after one retry with a
   * fresh token), or the credential could not be had (a dead grant, a refused client). Never the
   * agent's fault: refunded as an upstream error, with its own code.
   */
  | { kind: "auth_failed" };

export type CallOutcomeKind = CallOutcome["kind"];

/** A tool as an upstream lists it. */
export type UpstreamTool = {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /**
   * The tool's other listed fields that agents see unchanged: `outputSchema` when the upstream
   * declares one, and for MCP upstreams `title`, `annotations` and `_meta` as listed.
   */
  listing: Record<string, unknown>;
  /** A REST tool's stored operation, which its calls' requests are built from (MCP tools have none). */
  operation?: RestOperation;
};
