// One JSON-RPC request (tools/call) as one POST on a session the SDK's client opened: the
// handshake, the negotiated protocol version, the session id and the server's event stream stay
// the SDK's; this sends the one request a paid call needs and reads the one answer to it, from a
// JSON body or from the event stream the server answers on. It exists because the SDK client's
// per-request work (its bookkeeping and a schema parse of every message) cost the desk about as
// much CPU as the rest of a clearing; the checks that matter to the desk are all made here or by
// the caller (CallToolResultSchema on the result).
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { EventSourceParserStream } from "eventsource-parser/stream";
import type { Fetch } from "../../core/upstream/bounded-fetch.ts";

/** What a session adds to every request: what the SDK's transport learnt at initialize. */
export type SessionHeaders = { sessionId: string | undefined; protocolVersion: string | undefined };

export type RpcAnswer = { result: Record<string, unknown> } | { error: { code: number; message: string } };

/** The upstream answered something that is not a JSON-RPC response to the request (its session is not trusted again). */
export class BrokenAnswer extends Error {
  override name = "BrokenAnswer";
}

/** Reconnections to a stream the server closed before its answer (SSE polling); the deadline bounds them too. */
const MAX_RESUMES = 20;

/**
 * POSTs `{jsonrpc, id, method, params}` and returns the response to `id`. An HTTP error status
 * throws StreamableHTTPError with that status, as the SDK's transport does, so one mapping reads
 * both; anything else that is not the answer throws BrokenAnswer. A server that closes its event
 * stream before the answer, after naming an event id, is asked again for the rest of the stream
 * (GET with Last-Event-ID), after the delay it asked for, as the SDK's transport does.
 */
export async function postRequest(
  fetch: Fetch,
  url: URL,
  session: SessionHeaders,
  id: string,
  method: string,
  params: Record<string, unknown>,
  deadline: number,
): Promise<RpcAnswer> {
  const headers = sessionHeaders(session);
  headers["content-type"] = "application/json";
  headers.accept = "application/json, text/event-stream";
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id, method, params }) });
  const type = await contentOf(res);
  if (type === "application/json") {
    const answer = answerTo(id, parsed(await res.text()));
    if (answer === null) throw new BrokenAnswer("the JSON answer holds no response to the request");
    return answer;
  }
  if (type !== "text/event-stream" || res.body === null) {
    await res.body?.cancel().catch(() => {});
    throw new BrokenAnswer(`the upstream answered with content type ${JSON.stringify(type ?? null)}`);
  }
  let read = await answerInStream(res.body, id);
  for (let resumes = 0; "resumeAfter" in read; resumes++) {
    if (resumes === MAX_RESUMES) throw new BrokenAnswer("the event stream kept closing before the response");
    // A server asking for a longer wait than the call has left cannot answer in time.
    if (Date.now() + read.retryMs >= deadline) throw new DOMException("the call's deadline passes before the stream may be resumed", "TimeoutError");
    await Bun.sleep(read.retryMs);
    const again = sessionHeaders(session);
    again.accept = "text/event-stream";
    again["last-event-id"] = read.resumeAfter;
    const resumed = await fetch(url, { method: "GET", headers: again });
    if ((await contentOf(resumed)) !== "text/event-stream" || resumed.body === null) {
      await resumed.body?.cancel().catch(() => {});
      throw new BrokenAnswer("the resumed stream is not an event stream");
    }
    read = await answerInStream(resumed.body, id, read);
  }
  return read;
}

function sessionHeaders(session: SessionHeaders): Record<string, string> {
  const headers: Record<string, string> = {};
  if (session.sessionId !== undefined) headers["mcp-session-id"] = session.sessionId;
  if (session.protocolVersion !== undefined) headers["mcp-protocol-version"] = session.protocolVersion;
  return headers;
}

/** The answer's media type; an HTTP error status throws StreamableHTTPError. */
async function contentOf(res: Response): Promise<string | undefined> {
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new StreamableHTTPError(res.status, `the upstream answered HTTP ${res.status}`);
  }
  return mediaType(res.headers.get("content-type"));
}

/** Where to resume a stream that ended before the answer: the last event id, after the delay the server asked for. */
type Resume = { resumeAfter: string; retryMs: number };

/** The SDK transport's delay before it reconnects, when the server names none. */
const DEFAULT_RETRY_MS = 1000;

/**
 * The response to `id` in an event stream. Events without data (a priming event, a keep-alive),
 * of another type, not JSON or not the answer (notifications, progress) are passed over, as the
 * SDK's transport passes them. A stream that ends first is resumed from its last event id, or
 * was broken when it named none.
 */
async function answerInStream(body: ReadableStream<Uint8Array>, id: string, from?: Resume): Promise<RpcAnswer | Resume> {
  let lastId = from?.resumeAfter;
  let retryMs = from?.retryMs ?? DEFAULT_RETRY_MS;
  const parser = new EventSourceParserStream({ onRetry: (ms) => (retryMs = ms) });
  const events = body.pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>).pipeThrough(parser);
  const reader = events.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        if (lastId === undefined) throw new BrokenAnswer("the event stream ended before the response");
        return { resumeAfter: lastId, retryMs };
      }
      if (value.id) lastId = value.id;
      if (!value.data || (value.event !== undefined && value.event !== "message")) continue;
      let message: unknown;
      try {
        message = JSON.parse(value.data);
      } catch {
        continue;
      }
      const answer = answerTo(id, message);
      if (answer !== null) return answer;
    }
  } finally {
    // The answer is in: the rest of the stream (the server may keep it open) is not read.
    reader.cancel().catch(() => {});
  }
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new BrokenAnswer("the upstream's answer is not JSON");
  }
}

/**
 * The response to `id` among one message or a batch of them, or null when none is. A message
 * with our id that is not a well-formed response (both or neither of result and error, an error
 * without an integer code) is broken, not skipped.
 */
export function answerTo(id: string, message: unknown): RpcAnswer | null {
  for (const m of Array.isArray(message) ? message : [message]) {
    if (typeof m !== "object" || m === null || (m as { id?: unknown }).id !== id || Object.hasOwn(m, "method")) continue;
    const r = m as { jsonrpc?: unknown; result?: unknown; error?: unknown };
    const hasResult = Object.hasOwn(r, "result");
    if (r.jsonrpc !== "2.0" || hasResult === Object.hasOwn(r, "error")) throw new BrokenAnswer("a response that is not JSON-RPC 2.0");
    if (hasResult) {
      if (typeof r.result !== "object" || r.result === null || Array.isArray(r.result)) throw new BrokenAnswer("a result that is not an object");
      return { result: r.result as Record<string, unknown> };
    }
    const e = r.error as { code?: unknown; message?: unknown } | null;
    if (typeof e !== "object" || e === null || !Number.isSafeInteger(e.code) || typeof e.message !== "string") {
      throw new BrokenAnswer("an error that is not a JSON-RPC error object");
    }
    return { error: { code: e.code as number, message: e.message } };
  }
  return null;
}

/** The media type of a Content-Type header, lower case, without its parameters. */
function mediaType(header: string | null): string | undefined {
  if (header === null) return undefined;
  return (header.split(";", 1)[0] ?? "").trim().toLowerCase();
}
