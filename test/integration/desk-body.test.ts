// Request bodies over a real socket: a body with a declared length is read in one go, a chunked
// one is counted as it streams. Both framings keep the 1 MiB bound (an agent cannot make the desk
// buffer more), refuse bytes that are not UTF-8, and both parse the same JSON.
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

/** A body sent with Content-Length (bytes) or chunked (a stream of 64 KiB pieces). */
function bodyOf(bytes: Uint8Array<ArrayBuffer>, framing: "length" | "chunked"): BodyInit {
  if (framing === "length") return bytes;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < bytes.length; at += 65536) controller.enqueue(bytes.subarray(at, at + 65536));
      controller.close();
    },
  });
}

async function send(text: string | Uint8Array<ArrayBuffer>, framing: "length" | "chunked", type = "application/json") {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  const r = await fetch(`${server.url}v1/tools/nowhere__tool`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": type },
    body: bodyOf(bytes, framing),
  });
  expect(seen).toEqual(framing === "length" ? { length: String(bytes.length), chunked: false } : { length: null, chunked: true });
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

    test(`${framing}: bytes that are not UTF-8 are BODY_INVALID, never read as U+FFFD and hashed`, async () => {
      // {"a":"<0xff>"}: a decoder that replaces would hand the clearing path a string the agent never sent.
      const notUtf8 = new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]);
      expect(await send(notUtf8, framing)).toEqual({ status: 400, body: { error: "BODY_INVALID" }, outcome: "refused_request" });
      expect(await send('{"a":"\uFFFD"}', framing)).toEqual({ status: 404, body: { error: "TOOL_UNKNOWN" }, outcome: "refused_tool_unknown" });
    });

    test(`${framing}: application/json with another charset is CONTENT_TYPE_INVALID`, async () => {
      expect(await send("{}", framing, "application/json; charset=latin1")).toEqual({
        status: 415,
        body: { error: "CONTENT_TYPE_INVALID" },
        outcome: "refused_request",
      });
      expect(await send("{}", framing, "application/json; charset=utf-8")).toEqual({
        status: 404,
        body: { error: "TOOL_UNKNOWN" },
        outcome: "refused_tool_unknown",
      });
    });

    test(`${framing}: one byte over the limit is BODY_TOO_LARGE and nothing is recorded`, async () => {
      const before = (await t.ledger.records.audit({ orgId: null, keyId: null, sinceMs: null, limit: 1000 })).length;
      const over = JSON.stringify({ pad: "x".repeat(MAX_BODY_BYTES - 9) });
      expect(over.length).toBe(MAX_BODY_BYTES + 1);
      expect(await send(over, framing)).toEqual({ status: 413, body: { error: "BODY_TOO_LARGE" }, outcome: "refused_request" });
      expect((await t.ledger.records.audit({ orgId: null, keyId: null, sinceMs: null, limit: 1000 })).length).toBe(before);
    });
  }
});
