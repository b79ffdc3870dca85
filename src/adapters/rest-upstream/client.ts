// The desk's client for one REST upstream: each tool call is one HTTP exchange built from the
// tool's stored operation (core/rest/request.ts), sent only to base_url's origin, never
// following a redirect, within the call's deadline, holding one of the upstream's connection
// slots, its answer read up to the cap; and sorted into the outcome that says who pays.
import type { ArgsProblem } from "../../core/desk/args.ts";
import { readAtMost } from "../../core/http/body.ts";
import { meaningOf, resultOf } from "../../core/rest/answer.ts";
import { buildRequest } from "../../core/rest/request.ts";
import type { RestTool } from "../../core/rest/tools.ts";
import { type Credential, CredentialUnavailable } from "../../core/upstream/credential.ts";
import type { Upstream } from "../../core/desk/ports.ts";
import type { CallOutcome, UpstreamTool } from "../../core/upstream/outcome.ts";
import { MAX_EXCHANGES_PER_UPSTREAM, MAX_UPSTREAM_ANSWER_BYTES, Slots } from "../../core/upstream/slots.ts";

export type RestUpstreamOptions = {
  name: string;
  baseUrl: URL;
  /** The tools made of the upstream's document at registration (core/rest/tools.ts), as stored. */
  tools: RestTool[];
  credential: Credential;
  timeoutMs: number;
};

export class RestUpstreamClient implements Upstream {
  readonly name: string;
  private readonly baseUrl: URL;
  private readonly tools: Map<string, RestTool>;
  private readonly credential: Credential;
  private readonly timeoutMs: number;
  private readonly slots = new Slots(MAX_EXCHANGES_PER_UPSTREAM);

  constructor(options: RestUpstreamOptions) {
    this.name = options.name;
    this.baseUrl = new URL(options.baseUrl);
    this.tools = new Map(options.tools.map((t) => [t.name, t]));
    this.credential = options.credential;
    this.timeoutMs = options.timeoutMs;
  }

  /** The tools as the upstream port lists them (from the stored document: no request is made). */
  async listTools(): Promise<UpstreamTool[]> {
    return [...this.tools.values()].map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      listing: t.outputSchema ? { outputSchema: t.outputSchema } : {},
      operation: t.operation,
    }));
  }

  /**
   * What stops valid arguments from becoming this tool's request (a path segment that would be
   * empty, `.` or `..`, a header value with a line break...), found without sending anything.
   */
  checkArgs(tool: string, args: Record<string, unknown>): ArgsProblem[] {
    const entry = this.tools.get(tool);
    if (entry === undefined) return [];
    try {
      const built = buildRequest(this.baseUrl, entry.operation, args);
      return built.ok ? [] : built.problems;
    } catch {
      // A stored operation that no longer builds is the desk's fault: call() answers it as an upstream error.
      return [];
    }
  }

  /** One call of `tool` within the deadline; never throws. */
  async call(tool: string, args: Record<string, unknown>): Promise<CallOutcome> {
    const entry = this.tools.get(tool);
    if (entry === undefined) return { kind: "upstream_error" };
    let built: ReturnType<typeof buildRequest>;
    try {
      built = buildRequest(this.baseUrl, entry.operation, args);
    } catch {
      // A stored operation that no longer builds: the desk's fault, nothing is sent.
      return { kind: "upstream_error" };
    }
    if (!built.ok) return { kind: "args_refused" };
    const request = built.request;

    const cut = new AbortController();
    const timer = setTimeout(() => cut.abort(new DOMException("the upstream timeout passed", "TimeoutError")), this.timeoutMs);
    timer.unref();
    let holding = false;
    try {
      await this.slots.acquire(cut.signal);
      holding = true;
      for (let attempt = 0; ; attempt++) {
        const url = new URL(request.url);
        const headers = new Headers(request.headers);
        const applied = await this.credential.apply(url, headers, cut.signal);
        // The credential may add to the query and the headers, nothing else: the request still
        // goes to the operation's own path on base_url's origin.
        if (url.origin !== this.baseUrl.origin || url.pathname !== request.url.pathname || url.hash !== "") return { kind: "upstream_error" };
        const res = await fetch(url, { method: request.method, headers, body: request.body, redirect: "manual", signal: cut.signal });
        const meaning = meaningOf(res.status);
        if (meaning !== "ok") {
          // An error body is never shown to the agent: it is not read at all.
          await res.body?.cancel().catch(() => {});
          if (meaning !== "auth_refused") return { kind: meaning };
          // One more attempt with a fresh token when the credential has one to give.
          if (res.status === 401 && attempt === 0 && this.credential.rejected(applied)) continue;
          return { kind: "auth_failed" };
        }
        const bytes = await readAtMost(res.body, MAX_UPSTREAM_ANSWER_BYTES);
        if (bytes === undefined) return { kind: "upstream_error" };
        const result = resultOf(res.headers.get("content-type"), bytes);
        return result === null ? { kind: "upstream_error" } : { kind: "ok", result };
      }
    } catch (err) {
      if (err instanceof CredentialUnavailable) return { kind: err.kind };
      if (cut.signal.aborted) return { kind: "timeout" };
      return { kind: "upstream_error" };
    } finally {
      clearTimeout(timer);
      // Ends the exchange: a body still being read is cut, and its socket closed.
      cut.abort();
      if (holding) this.slots.release();
    }
  }

  async close(): Promise<void> {}

  /** Exchanges holding a slot now. */
  testOnlyExchangesOpen(): number {
    return this.slots.inUse();
  }
}
