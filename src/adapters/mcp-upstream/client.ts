// The desk's MCP client for one upstream (Streamable HTTP through the SDK), the "mcp" kind of the
// upstream port (core/desk/ports.ts): one session shared by concurrent calls, opened on first use
// and opened again after a failure; a deadline on every call; and each failure sorted into what
// the clearing path needs to know (who pays).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { fetchWithinOrigin } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolResultSchema, ErrorCode, ListToolsResultSchema, ResultSchema } from "@modelcontextprotocol/sdk/types.js";
import type { Upstream } from "../../core/desk/ports.ts";
import type { CallOutcome, UpstreamTool } from "../../core/upstream/outcome.ts";
import { boundedFetch, type Fetch } from "../../core/upstream/bounded-fetch.ts";
import { MAX_EXCHANGES_PER_UPSTREAM, MAX_UPSTREAM_ANSWER_BYTES } from "../../core/upstream/slots.ts";
import { type Credential, CredentialUnavailable } from "../../core/upstream/credential.ts";
import { credentialFetch } from "./credential-fetch.ts";
import { BrokenAnswer, postRequest } from "./rpc-call.ts";

/**
 * Fields of an upstream's tool listing that reach agents unchanged (name and description are
 * the desk's own, inputSchema is kept apart). `execution` (task support) and `icons` (images
 * fetched from wherever the upstream points) are left out: the desk runs no tasks and vouches
 * for no third-party URL.
 */
export const LISTED_FIELDS = ["title", "outputSchema", "annotations", "_meta"] as const;

/** Pages of tools/list read at most, so an upstream cannot keep registration looping. */
const MAX_TOOL_PAGES = 100;

const CLIENT_INFO = { name: "ask-only-desk", version: "1" };

/** A session the SDK opened: its client (handshake, listing, notifications) and the transport's session headers. */
type Session = { client: Client; transport: StreamableHTTPClientTransport };

export class UpstreamClient implements Upstream {
  private session: Promise<Session> | null = null;
  /** The desk's tools/call ids: strings, so they never meet the SDK client's numeric ids on the same session. */
  private nextCallId = 0;
  /** The same fetch as the SDK transport's, redirects handled as it handles them. */
  private readonly callFetch: Fetch;
  /**
   * fetch with the operator's credential on every exchange (credential-fetch.ts), each exchange
   * cut at the deadline and its answer bounded (core/upstream/bounded-fetch.ts).
   */
  private readonly boundedFetch: Fetch;

  constructor(
    readonly name: string,
    private readonly url: URL,
    credential: Credential,
    private readonly timeoutMs: number,
  ) {
    const bounded = boundedFetch({ timeoutMs, maxExchanges: MAX_EXCHANGES_PER_UPSTREAM, maxAnswerBytes: MAX_UPSTREAM_ANSWER_BYTES });
    this.boundedFetch = credentialFetch(credential, bounded, timeoutMs);
    this.callFetch = fetchWithinOrigin(this.boundedFetch);
  }

  /** The shared session: every concurrent caller waits on the same handshake. */
  private connect(timeoutMs: number): Promise<Session> {
    if (this.session === null) {
      const attempt = (async () => {
        const client = new Client(CLIENT_INFO, { capabilities: {} });
        const transport = new StreamableHTTPClientTransport(this.url, { fetch: this.boundedFetch });
        await client.connect(transport, { timeout: timeoutMs });
        return { client, transport };
      })();
      this.session = attempt;
      attempt.catch(() => this.drop(attempt));
    }
    return this.session;
  }

  /**
   * Forgets a failed session so the next call opens a new one. The old client is closed only
   * after the call deadline, so calls still in flight on it are not cut off by another's failure.
   */
  private drop(failed: Promise<Session>): void {
    if (this.session !== failed) return;
    this.session = null;
    failed.then(
      ({ client }) => setTimeout(() => client.close().catch(() => {}), this.timeoutMs).unref(),
      () => {},
    );
  }

  /** initialize + every page of tools/list; throws on any failure (registration reports it). */
  async listTools(): Promise<UpstreamTool[]> {
    const session = this.connect(this.timeoutMs);
    try {
      const { client } = await session;
      const tools: UpstreamTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_TOOL_PAGES; page++) {
        const page = await client.request({ method: "tools/list", params: cursor === undefined ? {} : { cursor } }, ResultSchema, { timeout: this.timeoutMs });
        // Checked against the SDK's schema, but read as sent: the SDK's parsed copy drops the
        // fields it does not know (in annotations, say), which agents must see unchanged.
        if (!ListToolsResultSchema.safeParse(page).success) throw new Error("tools/list answered something that is not a tool list");
        const answer = page as { tools: Record<string, unknown>[]; nextCursor?: string };
        for (const t of answer.tools) {
          const listing = Object.fromEntries(LISTED_FIELDS.filter((f) => Object.hasOwn(t, f)).map((f) => [f, t[f]]));
          tools.push({
            name: t.name as string,
            description: (t.description as string | undefined) ?? "",
            inputSchema: t.inputSchema as Record<string, unknown>,
            listing,
          });
        }
        cursor = answer.nextCursor;
        if (cursor === undefined) return tools;
      }
      throw new Error("tools/list did not end");
    } catch (err) {
      this.drop(session);
      // The operator's credential refused (or none could be had): registration says so.
      if (err instanceof StreamableHTTPError && (err.code === 401 || err.code === 403)) throw new CredentialUnavailable("auth_failed");
      throw err;
    }
  }

  /**
   * tools/call within the call deadline, as one POST on the shared session (rpc-call.ts); never
   * throws. A call cut at its deadline tells the upstream it was cancelled, as the SDK would.
   */
  async call(tool: string, args: Record<string, unknown>): Promise<CallOutcome> {
    const deadline = Date.now() + this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const left = deadline - Date.now();
      if (left <= 0) return { kind: "timeout" };
      const session = this.connect(left);
      const id = `ask-only-${++this.nextCallId}`;
      let opened: Session | undefined;
      try {
        opened = await session;
        const { transport } = opened;
        // Every exchange is cut at timeoutMs; one that starts late (after a handshake) is cut at the call's deadline.
        const fetch: Fetch =
          deadline - Date.now() < this.timeoutMs
            ? (u, init) => this.callFetch(u, { ...init, signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())) })
            : this.callFetch;
        const answer = await postRequest(
          fetch,
          this.url,
          { sessionId: transport.sessionId, protocolVersion: transport.protocolVersion },
          id,
          "tools/call",
          {
            name: tool,
            arguments: args,
          },
          deadline,
        );
        if ("error" in answer) {
          if (answer.error.code === ErrorCode.RequestTimeout) return { kind: "timeout" };
          if (answer.error.code === ErrorCode.InvalidParams) return { kind: "args_refused" };
          return { kind: "upstream_error" };
        }
        const result = answer.result;
        // Checked against the SDK's schema but kept as sent, so the agent gets (and the receipt
        // binds) the upstream's answer with every field, not the SDK's parsed copy.
        if (!CallToolResultSchema.safeParse(result).success) return { kind: "upstream_error" };
        if (result.isError !== true) return { kind: "ok", result };
        return { kind: blamesInput(result) ? "args_refused" : "tool_failed" };
      } catch (err) {
        if (err instanceof CredentialUnavailable) return { kind: err.kind };
        if (opened !== undefined && (isTimeout(err) || Date.now() >= deadline)) {
          opened.client
            .notification({ method: "notifications/cancelled", params: { requestId: id, reason: "the desk's deadline for the call passed" } })
            .catch(() => {});
          return { kind: "timeout" };
        }
        // An HTTP error status leaves the session usable; anything else (refused connection,
        // broken answer, 404 for a session the upstream forgot) opens a new one next time.
        const status = err instanceof StreamableHTTPError ? err.code : undefined;
        // 401 (after the credential's one retry) or 403: the operator's credential, never the agent's fault.
        if (status === 401 || status === 403) return { kind: "auth_failed" };
        if (status === undefined || status === 404 || err instanceof BrokenAnswer) this.drop(session);
        // 404 on an established session: the upstream forgot it (restart), so the tool never
        // ran and one retry on a new session cannot make it run twice.
        if (status === 404 && attempt === 0) continue;
        if (opened === undefined && Date.now() >= deadline) return { kind: "timeout" };
        return { kind: "upstream_error" };
      }
    }
  }

  async close(): Promise<void> {
    const session = this.session;
    this.session = null;
    if (session) await session.then(({ client }) => client.close()).catch(() => {});
  }
}

const INVALID_PARAMS = String(ErrorCode.InvalidParams);

/** The deadline's cut (bounded-fetch.ts, or the late exchange's own signal). */
const isTimeout = (err: unknown) => err instanceof DOMException && err.name === "TimeoutError";

/** An isError result blames the input when it carries the JSON-RPC invalid-params code. */
function blamesInput(result: Record<string, unknown>): boolean {
  const structured = result.structuredContent as { code?: unknown } | undefined;
  if (structured && (structured.code === ErrorCode.InvalidParams || structured.code === INVALID_PARAMS)) return true;
  const content = Array.isArray(result.content) ? result.content : [];
  return content.some(
    (c: unknown) =>
      typeof c === "object" && c !== null && (c as { type?: unknown }).type === "text" && String((c as { text?: unknown }).text).includes(INVALID_PARAMS),
  );
}
