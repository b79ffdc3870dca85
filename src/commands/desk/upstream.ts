// The desk's MCP client for one upstream (Streamable HTTP through the SDK): one session shared
// by concurrent calls, opened on first use and opened again after a failure; a deadline on
// every call; and each failure sorted into what the clearing path needs to know (who pays).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolResultSchema, ErrorCode, ListToolsResultSchema, McpError, ResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { readAtMost } from "../../core/body.ts";

export type UpstreamTool = {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** The tool's other fields the desk shows agents as the upstream listed them (LISTED_FIELDS). */
  listing: Record<string, unknown>;
};

/**
 * Fields of an upstream's tool listing that reach agents unchanged (name and description are
 * the desk's own, inputSchema is kept apart). `execution` (task support) and `icons` (images
 * fetched from wherever the upstream points) are left out: the desk runs no tasks and vouches
 * for no third-party URL.
 */
export const LISTED_FIELDS = ["title", "outputSchema", "annotations", "_meta"] as const;

export type CallOutcome =
  | { kind: "ok"; result: Record<string, unknown> }
  /** Transport failure, HTTP error status, or a protocol error that is not about the input. */
  | { kind: "upstream_error" }
  | { kind: "timeout" }
  /** JSON-RPC invalid params, or an isError result carrying -32602: the input was refused. */
  | { kind: "args_refused" }
  /** Any other isError result: the tool ran and failed. */
  | { kind: "tool_failed" };

/**
 * HTTP exchanges one upstream may have open at once (calls, their cancellations, the event
 * stream); more wait for a slot within their deadline. Half of the runtime's shared pool of 256
 * fetch connections: one upstream that stops answering cannot take the connections the others need.
 */
export const MAX_EXCHANGES_PER_UPSTREAM = 128;

/**
 * The most bytes one HTTP exchange with an upstream may carry back (a JSON answer, or all of an
 * event stream): a registered upstream cannot make the desk buffer without end. Past it the
 * exchange fails, and the call is refunded as an upstream error.
 */
export const MAX_UPSTREAM_ANSWER_BYTES = 4 * 1024 * 1024;

class AnswerTooLarge extends Error {
  override name = "AnswerTooLarge";
}

/** A counting semaphore whose waiters give up when their signal aborts. */
class Slots {
  private used = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly size: number) {}

  acquire(signal: AbortSignal): Promise<void> {
    if (this.used < this.size && this.waiting.length === 0) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener("abort", giveUp);
        this.used++;
        resolve();
      };
      const giveUp = () => {
        const i = this.waiting.indexOf(grant);
        if (i !== -1) this.waiting.splice(i, 1);
        reject(signal.reason);
      };
      this.waiting.push(grant);
      signal.addEventListener("abort", giveUp, { once: true });
    });
  }

  release(): void {
    this.used--;
    this.waiting.shift()?.();
  }
}

/** Pages of tools/list read at most, so an upstream cannot keep registration looping. */
const MAX_TOOL_PAGES = 100;

const CLIENT_INFO = { name: "ask-only-desk", version: "1" };

export class UpstreamClient {
  private session: Promise<Client> | null = null;

  constructor(
    readonly name: string,
    private readonly url: URL,
    private readonly headers: Record<string, string>,
    private readonly timeoutMs: number,
  ) {}

  /**
   * fetch with every HTTP exchange cut at the timeout, body included. The SDK's request timeout
   * only stops waiting: without this, each call to an upstream that accepts and never answers
   * (or dribbles) kept its socket open for good, and once they filled the runtime's shared pool
   * of 256 connections every other upstream's calls timed out too.
   */
  private readonly boundedFetch: FetchLike = async (url, init) => {
    const cut = new AbortController();
    let holding = false;
    let done = false;
    // Ends the exchange once: the timer goes and the slot returns.
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (holding) this.slots.release();
    };
    const timer = setTimeout(() => {
      cut.abort(new DOMException("the upstream timeout passed", "TimeoutError"));
      finish();
    }, this.timeoutMs);
    // Never what keeps the process alive (an event stream keeps it armed until the stream ends).
    timer.unref();
    let handedOff = false;
    try {
      await this.slots.acquire(cut.signal);
      holding = !done;
      if (done) this.slots.release();
      const res = await fetch(url, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, cut.signal]) : cut.signal });
      // An event stream stays under the deadline while it is read; a JSON answer is read here,
      // so the exchange ends now and does not hold its timer and slot for the whole timeout.
      if ((res.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream") && res.body !== null) {
        handedOff = true;
        let seen = 0;
        const body = res.body.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, stream) {
              seen += chunk.byteLength;
              if (seen > MAX_UPSTREAM_ANSWER_BYTES) {
                finish();
                stream.error(new AnswerTooLarge());
                return;
              }
              stream.enqueue(chunk);
            },
            flush: finish,
          }),
        );
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
      }
      const body = await readAnswer(res);
      return new Response(res.status === 204 || res.status === 304 ? null : body, { status: res.status, statusText: res.statusText, headers: res.headers });
    } finally {
      if (!handedOff) finish();
    }
  };

  private readonly slots = new Slots(MAX_EXCHANGES_PER_UPSTREAM);

  /** The shared session: every concurrent caller waits on the same handshake. */
  private connect(timeoutMs: number): Promise<Client> {
    if (this.session === null) {
      const attempt = (async () => {
        const client = new Client(CLIENT_INFO, { capabilities: {} });
        const transport = new StreamableHTTPClientTransport(this.url, { requestInit: { headers: this.headers }, fetch: this.boundedFetch });
        await client.connect(transport, { timeout: timeoutMs });
        return client;
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
  private drop(failed: Promise<Client>): void {
    if (this.session !== failed) return;
    this.session = null;
    failed.then(
      (client) => setTimeout(() => client.close().catch(() => {}), this.timeoutMs).unref(),
      () => {},
    );
  }

  /** initialize + every page of tools/list; throws on any failure (registration reports it). */
  async listTools(): Promise<UpstreamTool[]> {
    const session = this.connect(this.timeoutMs);
    try {
      const client = await session;
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
          tools.push({ name: t.name as string, description: (t.description as string | undefined) ?? "", inputSchema: t.inputSchema as Record<string, unknown>, listing });
        }
        cursor = answer.nextCursor;
        if (cursor === undefined) return tools;
      }
      throw new Error("tools/list did not end");
    } catch (err) {
      this.drop(session);
      throw err;
    }
  }

  /** tools/call within the call deadline; never throws. */
  async call(tool: string, args: Record<string, unknown>): Promise<CallOutcome> {
    const deadline = Date.now() + this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const left = deadline - Date.now();
      if (left <= 0) return { kind: "timeout" };
      const session = this.connect(left);
      try {
        const client = await session;
        const result = (await client.request({ method: "tools/call", params: { name: tool, arguments: args } }, ResultSchema, {
          timeout: Math.max(1, deadline - Date.now()),
        })) as Record<string, unknown>;
        // Checked against the SDK's schema but kept as sent, so the agent gets (and the receipt
        // binds) the upstream's answer with every field, not the SDK's parsed copy.
        if (!CallToolResultSchema.safeParse(result).success) return { kind: "upstream_error" };
        if (result.isError !== true) return { kind: "ok", result };
        return { kind: blamesInput(result) ? "args_refused" : "tool_failed" };
      } catch (err) {
        if (err instanceof McpError) {
          if (err.code === ErrorCode.RequestTimeout) return { kind: "timeout" };
          if (err.code === ErrorCode.InvalidParams) return { kind: "args_refused" };
          return { kind: "upstream_error" };
        }
        // An HTTP error status leaves the session usable; anything else (refused connection,
        // broken answer, 404 for a session the upstream forgot) opens a new one next time.
        const status = err instanceof StreamableHTTPError ? err.code : undefined;
        if (status === undefined || status === 404) this.drop(session);
        // 404 on an established session: the upstream forgot it (restart), so the tool never
        // ran and one retry on a new session cannot make it run twice.
        if (status === 404 && attempt === 0) continue;
        return { kind: "upstream_error" };
      }
    }
  }

  async close(): Promise<void> {
    const session = this.session;
    this.session = null;
    if (session) await session.then((c) => c.close()).catch(() => {});
  }
}

/** A JSON answer's bytes, refused past MAX_UPSTREAM_ANSWER_BYTES whatever it declares. */
async function readAnswer(res: Response): Promise<ArrayBuffer> {
  const declared = res.headers.get("content-length");
  // A declared length bounds what is read (HTTP framing): read it in one go when small enough.
  // Not for a compressed answer: fetch decompresses it, and its length tells only the wire size
  // (a few KB of gzip can hold gigabytes), so it is counted as it decompresses.
  const encoded = (res.headers.get("content-encoding") ?? "identity").toLowerCase() !== "identity";
  if (!encoded && declared !== null && /^\d{1,15}$/.test(declared)) {
    if (Number(declared) <= MAX_UPSTREAM_ANSWER_BYTES) return res.arrayBuffer();
    await res.body?.cancel().catch(() => {});
    throw new AnswerTooLarge();
  }
  const bytes = await readAtMost(res.body, MAX_UPSTREAM_ANSWER_BYTES);
  if (bytes === undefined) throw new AnswerTooLarge();
  return bytes.buffer as ArrayBuffer;
}

const INVALID_PARAMS = String(ErrorCode.InvalidParams);

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
