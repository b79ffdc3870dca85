// An upstream cannot make the desk buffer without end: an answer past MAX_UPSTREAM_ANSWER_BYTES
// fails its exchange at once and the call is refunded as an upstream error with its receipt: a
// JSON answer (declared or chunked) before it is read, an event stream when it passes the cap.
// A compressed answer counts by what it decompresses to, not by its declared length. An answer
// under the cap is charged.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { MAX_UPSTREAM_ANSWER_BYTES } from "../../src/core/upstream/slots.ts";
import { makeDesk, type TestDesk } from "./desk-harness.ts";

type Framing = "declared" | "chunked" | "sse" | "gzip";
const FRAMINGS: Framing[] = ["declared", "chunked", "sse", "gzip"];

/** A bare Streamable-HTTP MCP server: one tool per answer size and framing. */
function startBigUpstream() {
  const sizes: Record<string, number> = { fits: MAX_UPSTREAM_ANSWER_BYTES - 4096, over: MAX_UPSTREAM_ANSWER_BYTES + 4096 };
  const answer = (id: unknown, result: unknown) => JSON.stringify({ jsonrpc: "2.0", id, result });
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (req.method !== "POST") return new Response(null, { status: 405 });
      const msg = (await req.json()) as { id?: unknown; method: string; params?: { name?: string } };
      if (msg.id === undefined) return new Response(null, { status: 202 });
      if (msg.method === "initialize") {
        return Response.json({
          jsonrpc: "2.0",
          id: msg.id,
          result: { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "big", version: "1" } },
        });
      }
      if (msg.method === "tools/list") {
        const tools = FRAMINGS.flatMap((f) => ["fits", "over"].map((s) => ({ name: `${s}_${f}`, inputSchema: { type: "object" } })));
        return Response.json({ jsonrpc: "2.0", id: msg.id, result: { tools } });
      }
      const [size, framing] = (msg.params?.name ?? "").split("_") as [string, Framing];
      const text = answer(msg.id, { content: [{ type: "text", text: "x".repeat(sizes[size]! - 200) }] });
      if (framing === "declared") return new Response(text, { headers: { "content-type": "application/json" } });
      // A few KB on the wire, with a Content-Length that tells only the compressed size.
      if (framing === "gzip") return new Response(Bun.gzipSync(text), { headers: { "content-type": "application/json", "content-encoding": "gzip" } });
      const bytes = new TextEncoder().encode(framing === "sse" ? `event: message\ndata: ${text}\n\n` : text);
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          for (let at = 0; at < bytes.length; at += 65_536) c.enqueue(bytes.subarray(at, at + 65_536));
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": framing === "sse" ? "text/event-stream" : "application/json" } });
    },
  });
}

setDefaultTimeout(15_000);
const UPSTREAM_TIMEOUT_MS = 2_000;

let upstream: ReturnType<typeof startBigUpstream>;
let t: TestDesk;
let secret: string;

beforeAll(async () => {
  upstream = startBigUpstream();
  t = await makeDesk({ upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS });
  expect((await t.admin("POST", "/admin/upstreams", { name: "big", url: `http://127.0.0.1:${upstream.port}/mcp` })).status).toBe(201);
  const tools = FRAMINGS.flatMap((f) => [`big__fits_${f}`, `big__over_${f}`]);
  for (const tool of tools) expect((await t.admin("PUT", `/admin/tools/${tool}`, { price_mc: 1000, upstream_cost_mc: 0 })).status).toBe(200);
  ({ secret } = await t.makeKey({ budget_mc: 1_000_000, reset: "none", allow: tools }));
});
afterAll(async () => {
  await t[Symbol.asyncDispose]();
  upstream.stop(true);
});

describe("the upstream answer cap", () => {
  const refusal = {
    declared: [502, "UPSTREAM_ERROR", "refunded_upstream_error"],
    chunked: [502, "UPSTREAM_ERROR", "refunded_upstream_error"],
    sse: [502, "UPSTREAM_ERROR", "refunded_upstream_error"],
    gzip: [502, "UPSTREAM_ERROR", "refunded_upstream_error"],
  } as const;
  for (const framing of FRAMINGS) {
    test(`${framing}: an answer under the cap is charged; one past it is refunded (${refusal[framing][1]})`, async () => {
      const fits = await t.call(secret, `big__fits_${framing}`, {});
      expect(fits.status).toBe(200);
      expect(fits.headers.get("x-clearing-outcome")).toBe("charged");
      await fits.arrayBuffer();

      const before = Number((await (await t.call(secret, "big__none", {})).headers.get("x-clearing-remaining-mc")) ?? Number.NaN);
      const over = await t.call(secret, `big__over_${framing}`, {});
      const body = (await over.json()) as { error: string; receipt: { receipt: { outcome: string; amount_mc: number } } };
      expect([over.status, body.error, body.receipt.receipt.outcome]).toEqual([...refusal[framing]]);
      expect(body.receipt.receipt.amount_mc).toBe(0);
      expect(Number(over.headers.get("x-clearing-remaining-mc"))).toBe(before);
    });
  }
});
