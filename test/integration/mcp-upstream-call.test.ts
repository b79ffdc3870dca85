// A paid MCP call is one POST on the SDK's session (src/adapters/mcp-upstream/rpc-call.ts): the
// answer is found in a JSON body, a batch or an event stream whatever comes before it; a stream
// closed before the answer is resumed with Last-Event-ID; anything that is not the answer to
// this call is never taken for it. The upstream here is a hand-written Streamable HTTP server, so
// each framing is exactly what the test sends.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { UpstreamClient } from "../../src/adapters/mcp-upstream/client.ts";
import { answerTo, BrokenAnswer } from "../../src/adapters/mcp-upstream/rpc-call.ts";
import { NO_CREDENTIAL } from "../../src/core/upstream/credential.ts";

const SESSION = "session-7f3a";
const PROTOCOL = "2025-06-18";
const ok = (text: string) => ({ content: [{ type: "text", text }] });

type Seen = { method: string; rpc?: string; session: string | null; protocol: string | null; lastEventId: string | null; id?: unknown; params?: unknown };
let seen: Seen[] = [];
/** The event ids a resumed stream picks up after, and what it then sends. */
const resumable = new Map<string, (id: string) => string>();

const sse = (events: string) => new Response(events, { headers: { "content-type": "text/event-stream" } });
const event = (data: unknown, extra = "") => `${extra}event: message\ndata: ${JSON.stringify(data)}\n\n`;

let server: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const base = {
        session: req.headers.get("mcp-session-id"),
        protocol: req.headers.get("mcp-protocol-version"),
        lastEventId: req.headers.get("last-event-id"),
      };
      if (req.method === "GET") {
        seen.push({ method: "GET", ...base });
        const after = base.lastEventId === null ? undefined : resumable.get(base.lastEventId);
        return after === undefined ? new Response(null, { status: 405 }) : sse(after(base.lastEventId!));
      }
      if (req.method === "DELETE") return new Response(null, { status: 200 });
      const msg = (await req.json()) as { id?: unknown; method: string; params?: { name?: string; arguments?: { text?: string } } };
      seen.push({ method: "POST", rpc: msg.method, id: msg.id, params: msg.params, ...base });
      if (msg.method === "initialize") {
        return Response.json(
          { jsonrpc: "2.0", id: msg.id, result: { protocolVersion: PROTOCOL, capabilities: { tools: {} }, serverInfo: { name: "hand", version: "1" } } },
          { headers: { "mcp-session-id": SESSION } },
        );
      }
      if (msg.id === undefined) return new Response(null, { status: 202 });
      const id = msg.id;
      const reply = (result: unknown) => ({ jsonrpc: "2.0", id, result });
      switch (msg.params?.name) {
        case "json":
          return Response.json(reply(ok("json")));
        case "batch":
          return Response.json([{ jsonrpc: "2.0", method: "notifications/message", params: {} }, reply(ok("in a batch"))]);
        case "sse-noise":
          // A priming event, a keep-alive comment, a notification, an event of another type, a
          // message that is not JSON, an answer to another id, then the answer.
          return sse(
            `id: p1\ndata: \n\n: keep-alive\n\n${event({ jsonrpc: "2.0", method: "notifications/progress", params: { progress: 1 } })}` +
              `event: other\ndata: ${JSON.stringify(reply(ok("wrong event type")))}\n\ndata: {not json\n\n` +
              `${event({ jsonrpc: "2.0", id: `${id}x`, result: ok("another id") })}${event(reply(ok("after the noise")))}`,
          );
        case "sse-resume":
          // Closes after a priming event; the answer comes on the resumed stream.
          resumable.set(`r-${id}`, () => `retry: 10\n\n${event(reply(ok("resumed")))}`);
          return sse(`id: r-${id}\nretry: 10\ndata: \n\n`);
        case "sse-open": {
          // The answer, then a stream the server keeps open: the desk must not wait for its end.
          const answer = new TextEncoder().encode(event(reply(ok("open stream"))));
          return new Response(
            new ReadableStream({
              start(c) {
                c.enqueue(answer);
              },
            }),
            { headers: { "content-type": "text/event-stream" } },
          );
        }
        case "sse-long-retry":
          return sse(`id: late-${id}\nretry: 600000\ndata: \n\n`);
        case "sse-no-id":
          return sse(event({ jsonrpc: "2.0", method: "notifications/progress", params: {} }));
        case "not-jsonrpc":
          return Response.json({ id, result: ok("no jsonrpc member") });
        case "both":
          return Response.json({ jsonrpc: "2.0", id, result: ok("x"), error: { code: 1, message: "y" } });
        case "invalid-params":
          return Response.json({ jsonrpc: "2.0", id, error: { code: -32602, message: "bad arguments" } });
        case "server-timeout":
          return Response.json({ jsonrpc: "2.0", id, error: { code: -32001, message: "took too long" } });
        case "other-error":
          return Response.json({ jsonrpc: "2.0", id, error: { code: -32603, message: "internal" } });
        case "bad-result":
          return Response.json(reply({ content: "not an array" }));
        case "text-plain":
          return new Response("hello", { headers: { "content-type": "text/plain" } });
        case "hang":
          return new Promise<Response>(() => {});
        default:
          return Response.json({ jsonrpc: "2.0", id, error: { code: -32602, message: "unknown tool" } });
      }
    },
  });
});
afterAll(() => server.stop(true));

const client = (timeoutMs = 5_000) => new UpstreamClient("hand", new URL(`http://127.0.0.1:${server.port}/mcp`), NO_CREDENTIAL, timeoutMs);

describe("one tools/call on the SDK's session", () => {
  test("carries the session id, the negotiated protocol version and a string id the SDK never uses", async () => {
    const c = client();
    seen = [];
    expect(await c.call("json", { text: "a" })).toEqual({ kind: "ok", result: ok("json") });
    expect(await c.call("json", { text: "b" })).toEqual({ kind: "ok", result: ok("json") });
    const calls = seen.filter((s) => s.rpc === "tools/call");
    expect(calls.map((s) => [s.session, s.protocol, s.id])).toEqual([
      [SESSION, PROTOCOL, "ask-only-1"],
      [SESSION, PROTOCOL, "ask-only-2"],
    ]);
    expect(calls[0]!.params).toEqual({ name: "json", arguments: { text: "a" } });
    // The SDK's own requests on the session use numbers.
    expect(typeof seen.find((s) => s.rpc === "initialize")!.id).toBe("number");
    await c.close();
  });

  test("the answer inside a batch, and after every kind of event that is not it", async () => {
    const c = client();
    expect(await c.call("batch", {})).toEqual({ kind: "ok", result: ok("in a batch") });
    expect(await c.call("sse-noise", {})).toEqual({ kind: "ok", result: ok("after the noise") });
    await c.close();
  });

  test("a stream the server keeps open after the answer gives its exchange slot back at once", async () => {
    const c = client(3_000);
    // More calls than an upstream has slots (128): a slot held until the deadline would make the
    // calls past the 128th wait for one.
    for (let i = 0; i < 140; i++) {
      const started = performance.now();
      expect(await c.call("sse-open", {})).toEqual({ kind: "ok", result: ok("open stream") });
      expect(performance.now() - started).toBeLessThan(1_000);
    }
    await c.close();
  }, 30_000);

  test("a stream closed before the answer is resumed from its last event id, with the session's headers", async () => {
    const c = client();
    seen = [];
    expect(await c.call("sse-resume", {})).toEqual({ kind: "ok", result: ok("resumed") });
    const resumed = seen.filter((s) => s.method === "GET" && s.lastEventId !== null);
    expect(resumed.map((s) => [s.lastEventId, s.session, s.protocol])).toEqual([[expect.stringMatching(/^r-ask-only-\d+$/), SESSION, PROTOCOL]]);
    await c.close();
  });

  test("a stream that asks for a wait past the deadline ends as a timeout at once, and the call is cancelled", async () => {
    const c = client(1_000);
    seen = [];
    const started = performance.now();
    expect(await c.call("sse-long-retry", {})).toEqual({ kind: "timeout" });
    expect(performance.now() - started).toBeLessThan(900);
    await Bun.sleep(50);
    const cancelled = seen.find((s) => s.rpc === "notifications/cancelled");
    expect(cancelled?.params).toMatchObject({ requestId: expect.stringMatching(/^ask-only-\d+$/) });
    await c.close();
  });

  test("an upstream that never answers: a timeout at the deadline, and the call is cancelled", async () => {
    const c = client(300);
    seen = [];
    const started = performance.now();
    expect(await c.call("hang", {})).toEqual({ kind: "timeout" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    await Bun.sleep(50);
    expect(seen.some((s) => s.rpc === "notifications/cancelled")).toBe(true);
    await c.close();
  });

  test("JSON-RPC errors: invalid params is the agent's, a server timeout a timeout, the rest an upstream error", async () => {
    const c = client();
    expect(await c.call("invalid-params", {})).toEqual({ kind: "args_refused" });
    expect(await c.call("server-timeout", {})).toEqual({ kind: "timeout" });
    expect(await c.call("other-error", {})).toEqual({ kind: "upstream_error" });
    await c.close();
  });

  test("what is not an answer is an upstream error, never a charge", async () => {
    const c = client();
    for (const tool of ["sse-no-id", "not-jsonrpc", "both", "bad-result", "text-plain"]) {
      expect([tool, await c.call(tool, {})]).toEqual([tool, { kind: "upstream_error" }]);
    }
    await c.close();
  });
});

describe("answerTo", () => {
  const id = "ask-only-9";
  test("finds the response to its id only; a request or notification with that id is not one", () => {
    expect(answerTo(id, { jsonrpc: "2.0", id, result: {} })).toEqual({ result: {} });
    expect(answerTo(id, { jsonrpc: "2.0", id: 9, result: {} })).toBeNull();
    expect(answerTo(id, { jsonrpc: "2.0", id, method: "ping" })).toBeNull();
    expect(
      answerTo(id, [
        { jsonrpc: "2.0", id: "x", result: {} },
        { jsonrpc: "2.0", id, error: { code: -1, message: "m" } },
      ]),
    ).toEqual({
      error: { code: -1, message: "m" },
    });
    expect(answerTo(id, null)).toBeNull();
  });

  test("a response to its id that is not well formed is broken, not skipped", () => {
    for (const bad of [
      { id, result: {} },
      { jsonrpc: "2.0", id },
      { jsonrpc: "2.0", id, result: [] },
      { jsonrpc: "2.0", id, result: null },
      { jsonrpc: "2.0", id, error: { code: 1.5, message: "m" } },
      { jsonrpc: "2.0", id, error: { code: 1 } },
      { jsonrpc: "2.0", id, error: "text" },
    ]) {
      expect(() => answerTo(id, bad)).toThrow(BrokenAnswer);
    }
  });
});
