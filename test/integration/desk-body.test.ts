// Request bodies over a real socket: a body with a declared length is read in one go, a chunked
// one is counted as it streams. Both framings keep the 1 MiB bound (an agent cannot make the desk
// buffer more) and both parse the same JSON.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MAX_BODY_BYTES } from "../../src/commands/desk/request.ts";
import { makeDesk, type TestDesk } from "./desk-harness.ts";

let t: TestDesk;
let server: ReturnType<typeof Bun.serve>;
let secret: string;
/** How the last request was framed, as the server saw it (so each case tests its own path). */
let seen: { length: string | null; chunked: boolean } | null = null;

beforeAll(async () => {
  t = await makeDesk();
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) => {
      seen = { length: req.headers.get("content-length"), chunked: req.headers.get("transfer-encoding") === "chunked" };
      return t.handler(req);
    },
  });
  secret = (await t.makeKey({ budget_mc: 1000, reset: "none", allow: [] })).secret;
});

afterAll(async () => {
  await server.stop(true);
  await t[Symbol.asyncDispose]();
});

/** A body sent with Content-Length (a string) or chunked (a stream of 64 KiB pieces). */
function bodyOf(text: string, framing: "length" | "chunked"): BodyInit {
  if (framing === "length") return text;
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < bytes.length; at += 65536) controller.enqueue(bytes.subarray(at, at + 65536));
      controller.close();
    },
  });
}

async function send(text: string, framing: "length" | "chunked") {
  const r = await fetch(`${server.url}v1/tools/nowhere__tool`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
    body: bodyOf(text, framing),
  });
  expect(seen).toEqual(framing === "length" ? { length: String(new TextEncoder().encode(text).length), chunked: false } : { length: null, chunked: true });
  return { status: r.status, body: await r.json(), outcome: r.headers.get("x-clearing-outcome") };
}

describe("request bodies over a socket", () => {
  for (const framing of ["length", "chunked"] as const) {
    test(`${framing}: JSON within the limit is read and cleared; broken JSON is BODY_INVALID`, async () => {
      // Exactly at the limit: read whole, so the call reaches the clearing path (unknown tool).
      const atLimit = JSON.stringify({ pad: "x".repeat(MAX_BODY_BYTES - 10) });
      expect(atLimit.length).toBe(MAX_BODY_BYTES);
      expect(await send(atLimit, framing)).toEqual({ status: 404, body: { error: "TOOL_UNKNOWN" }, outcome: "refused_tool_unknown" });
      expect(await send('{"pad": "é"}', framing)).toEqual({ status: 404, body: { error: "TOOL_UNKNOWN" }, outcome: "refused_tool_unknown" });
      expect(await send("{not json", framing)).toEqual({ status: 400, body: { error: "BODY_INVALID" }, outcome: "refused_request" });
    });

    test(`${framing}: one byte over the limit is BODY_TOO_LARGE and nothing is recorded`, async () => {
      const before = t.ledger.listAudit({ orgId: null, keyId: null, sinceMs: null, limit: 1000 }).length;
      const over = JSON.stringify({ pad: "x".repeat(MAX_BODY_BYTES - 9) });
      expect(over.length).toBe(MAX_BODY_BYTES + 1);
      expect(await send(over, framing)).toEqual({ status: 413, body: { error: "BODY_TOO_LARGE" }, outcome: "refused_request" });
      expect(t.ledger.listAudit({ orgId: null, keyId: null, sinceMs: null, limit: 1000 }).length).toBe(before);
    });
  }
});
