// The REST upstream client against a real HTTP server described by its own OpenAPI document:
// every status mapping, redirects refused, the answer cap, the deadline, the connection slots.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RestUpstreamClient } from "../../src/adapters/rest-upstream/client.ts";
import { fetchDocument, MAX_DOCUMENT_BYTES } from "../../src/adapters/rest-upstream/document-fetch.ts";
import { DocumentRefused } from "../../src/core/rest/document.ts";
import { type RestTool, toolsFromOpenApi } from "../../src/core/rest/tools.ts";
import { type Applied, type Credential, CredentialUnavailable, NO_CREDENTIAL } from "../../src/core/upstream/credential.ts";
import { MAX_EXCHANGES_PER_UPSTREAM, MAX_UPSTREAM_ANSWER_BYTES, Slots } from "../../src/core/upstream/slots.ts";
import { REST_DOCUMENT, type RestFixture, startRestFixture } from "../fixtures/rest-server.ts";

let fixture: RestFixture;
let tools: RestTool[];

beforeAll(async () => {
  fixture = startRestFixture();
  ({ tools } = await toolsFromOpenApi("fixture", REST_DOCUMENT));
});
afterAll(() => fixture.stop());

const client = (options: { timeoutMs?: number; credential?: Credential; base?: string } = {}) =>
  new RestUpstreamClient({
    name: "fixture",
    baseUrl: new URL(options.base ?? fixture.url),
    tools,
    credential: options.credential ?? NO_CREDENTIAL,
    timeoutMs: options.timeoutMs ?? 5_000,
  });

const reached = (from: number) => fixture.seen.slice(from);

describe("the fixture's document as tools", () => {
  test("every operation is a tool; the listing comes from the document, without a request", async () => {
    const before = fixture.seen.length;
    const listed = await client().listTools();
    expect(listed.map((t) => t.name)).toEqual([
      "getItem",
      "putItem",
      "getPart",
      "search",
      "status",
      "redirect",
      "list",
      "text",
      "binary",
      "empty",
      "garbled",
      "big",
      "hang",
      "dribble",
    ]);
    expect(listed[0]!.listing.outputSchema).toMatchObject({ type: "object", required: ["id"] });
    expect(fixture.seen.length).toBe(before);
  });
});

describe("answers", () => {
  test("a JSON object is the structured content, with its text copy", async () => {
    const answer = await client().call("getItem", { id: "42" });
    expect(answer).toEqual({
      kind: "ok",
      result: { content: [{ type: "text", text: '{"id":"42","method":"GET"}' }], structuredContent: { id: "42", method: "GET" } },
    });
  });

  test("parameters and the body arrive where the document says", async () => {
    const from = fixture.seen.length;
    const answer = await client().call("putItem", { id: "a b", dry: true, "X-Trace": "t-1", body: { n: 1 } });
    expect(answer.kind).toBe("ok");
    const [r] = reached(from);
    expect(r!.method).toBe("PUT");
    expect(r!.target).toBe("/items/a%20b?dry=true");
    expect(r!.headers.get("x-trace")).toBe("t-1");
    expect(r!.headers.get("content-type")).toBe("application/json");
    expect(r!.headers.get("accept")).toBe("application/json");
    expect(r!.body).toBe('{"n":1}');
    expect((await client().call("search", { q: "x&y", tags: ["a", "b"] })).kind).toBe("ok");
    expect(reached(from)[1]!.target).toBe("/search?q=x%26y&tags=a&tags=b");
  });

  test("a JSON array is wrapped as {value}; text is a text block; an empty answer is no content", async () => {
    expect(await client().call("list", {})).toEqual({
      kind: "ok",
      result: { content: [{ type: "text", text: '{"value":[1,2,3]}' }], structuredContent: { value: [1, 2, 3] } },
    });
    expect(await client().call("text", {})).toEqual({ kind: "ok", result: { content: [{ type: "text", text: "plain words" }] } });
    expect(await client().call("empty", {})).toEqual({ kind: "ok", result: { content: [] } });
  });

  test("what the desk cannot carry is an upstream error: binary, or JSON that does not parse", async () => {
    expect(await client().call("binary", {})).toEqual({ kind: "upstream_error" });
    expect(await client().call("garbled", {})).toEqual({ kind: "upstream_error" });
  });
});

describe("status mapping", () => {
  const cases: [number, string][] = [
    [200, "ok"],
    [201, "ok"],
    [202, "ok"],
    [204, "ok"],
    [400, "args_refused"],
    [404, "args_refused"],
    [409, "args_refused"],
    [422, "args_refused"],
    [401, "auth_failed"],
    [403, "auth_failed"],
    [429, "upstream_error"],
    [500, "upstream_error"],
    [502, "upstream_error"],
    [503, "upstream_error"],
    [504, "upstream_error"],
    [405, "upstream_error"],
    [408, "upstream_error"],
    [410, "upstream_error"],
    [413, "upstream_error"],
    [418, "upstream_error"],
    [300, "upstream_error"],
    [301, "upstream_error"],
    [302, "upstream_error"],
    [303, "upstream_error"],
    [307, "upstream_error"],
    [308, "upstream_error"],
  ];
  for (const [status, kind] of cases) {
    test(`${status} → ${kind}`, async () => {
      const from = fixture.seen.length;
      const answer = await client().call("status", { code: status });
      expect(answer.kind).toBe(kind as never);
      // Exactly one request; a 3xx Location is never followed.
      expect(reached(from).map((r) => r.path)).toEqual([`/status/${status}`]);
    });
  }

  test("a redirect is an upstream error and its target is never requested", async () => {
    const from = fixture.seen.length;
    expect(await client().call("redirect", {})).toEqual({ kind: "upstream_error" });
    expect(reached(from).map((r) => r.path)).toEqual(["/redirect"]);
  });

  test("a static credential refused with 401 is not retried", async () => {
    let applied = 0;
    const staticCredential: Credential = {
      apply: async (_url, headers) => {
        applied++;
        headers.set("authorization", "Bearer static");
        return { generation: 0 };
      },
      rejected: () => false,
      state: () => ({ state: "ok" }),
    };
    const from = fixture.seen.length;
    expect(await client({ credential: staticCredential }).call("status", { code: 401 })).toEqual({ kind: "auth_failed" });
    expect(applied).toBe(1);
    expect(reached(from)).toHaveLength(1);
    expect(reached(from)[0]!.headers.get("authorization")).toBe("Bearer static");
  });

  test("a 401 with a credential that has a fresher one is retried once, and only once", async () => {
    const generations: number[] = [];
    let generation = 0;
    const renewing: Credential = {
      apply: async () => ({ generation: ++generation }),
      rejected: (a: Applied) => {
        generations.push(a.generation);
        return true;
      },
      state: () => ({ state: "ok" }),
    };
    const from = fixture.seen.length;
    expect(await client({ credential: renewing }).call("status", { code: 401 })).toEqual({ kind: "auth_failed" });
    expect(reached(from)).toHaveLength(2);
    expect(generations).toEqual([1]);
    // 403 is the credential's lack of rights: a fresh token would not change it.
    expect(await client({ credential: renewing }).call("status", { code: 403 })).toEqual({ kind: "auth_failed" });
    expect(reached(from)).toHaveLength(3);
  });

  test("a credential that cannot be had gives its own outcome, and no request is sent", async () => {
    const from = fixture.seen.length;
    for (const kind of ["auth_failed", "upstream_error", "timeout"] as const) {
      const none: Credential = { apply: async () => Promise.reject(new CredentialUnavailable(kind)), rejected: () => false, state: () => ({ state: "ok" }) };
      expect(await client({ credential: none }).call("getItem", { id: "1" })).toEqual({ kind });
    }
    expect(reached(from)).toHaveLength(0);
  });

  test("a credential may not move the request: another origin or path is never sent", async () => {
    const from = fixture.seen.length;
    const moving: Credential = {
      apply: async (url) => {
        url.pathname = "/items/admin";
        return { generation: 0 };
      },
      rejected: () => false,
      state: () => ({ state: "ok" }),
    };
    expect(await client({ credential: moving }).call("getItem", { id: "1" })).toEqual({ kind: "upstream_error" });
    expect(reached(from)).toHaveLength(0);
  });
});

describe("the answer cap", () => {
  for (const framing of ["length", "chunked", "gzip"]) {
    test(`${framing}: exactly 4 MiB is carried, one byte more is an upstream error`, async () => {
      const at = await client().call("big", { bytes: MAX_UPSTREAM_ANSWER_BYTES, framing });
      expect(at.kind).toBe("ok");
      expect(await client().call("big", { bytes: MAX_UPSTREAM_ANSWER_BYTES + 1, framing })).toEqual({ kind: "upstream_error" });
    });
  }

  test("a small compressed answer that inflates past the cap is cut at the cap", async () => {
    expect(await client().call("big", { bytes: 64 * 1024 * 1024, framing: "gzip" })).toEqual({ kind: "upstream_error" });
  });
});

describe("the deadline and the slots", () => {
  test("an upstream that never answers: timeout at the deadline, its socket cut, its slot back", async () => {
    const c = client({ timeoutMs: 300 });
    const started = performance.now();
    const aborted = fixture.whenAborted(1);
    expect(await c.call("hang", {})).toEqual({ kind: "timeout" });
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(3_000);
    // On a loaded machine the cut may come before the request reaches the fixture's handler:
    // then there is no open request to cut. One that reached it must see its socket cut.
    if (fixture.seen.some((s) => s.path === "/hang")) {
      const late = Bun.sleep(10_000).then(() => "the fixture's /hang request was never cut");
      expect(await Promise.race([aborted.then(() => "cut"), late])).toBe("cut");
    }
    expect(c.testOnlyExchangesOpen()).toBe(0);
    fixture.release();
  });

  test("an upstream that dribbles its answer: timeout at the deadline, body included", async () => {
    const c = client({ timeoutMs: 400 });
    const started = performance.now();
    expect(await c.call("dribble", {})).toEqual({ kind: "timeout" });
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(c.testOnlyExchangesOpen()).toBe(0);
  });

  test(`at most ${MAX_EXCHANGES_PER_UPSTREAM} exchanges at once; the others wait for a slot and then clear`, async () => {
    const c = client({ timeoutMs: 20_000 });
    const calls = Array.from({ length: MAX_EXCHANGES_PER_UPSTREAM + 5 }, () => c.call("hang", {}));
    await fixture.whenHanging(MAX_EXCHANGES_PER_UPSTREAM);
    // The five beyond the limit never reached the upstream while the slots were full.
    expect(fixture.hanging()).toBe(MAX_EXCHANGES_PER_UPSTREAM);
    expect(c.testOnlyExchangesOpen()).toBe(MAX_EXCHANGES_PER_UPSTREAM);
    fixture.release();
    await fixture.whenHanging(5);
    fixture.release();
    const answers = await Promise.all(calls);
    expect(answers.every((a) => a.kind === "ok")).toBe(true);
    expect(fixture.maxHanging()).toBe(MAX_EXCHANGES_PER_UPSTREAM);
    expect(c.testOnlyExchangesOpen()).toBe(0);
  });

  test("a call waiting for a slot gives up when its deadline passes, and takes no slot", async () => {
    const slots = new Slots(1);
    await slots.acquire(new AbortController().signal);
    const giveUp = new AbortController();
    const waiting = slots.acquire(giveUp.signal);
    giveUp.abort(new Error("deadline"));
    await expect(waiting).rejects.toThrow("deadline");
    slots.release();
    expect(slots.inUse()).toBe(0);
    await slots.acquire(new AbortController().signal);
    expect(slots.inUse()).toBe(1);
  });
});

describe("a document fetched from openapi_url", () => {
  const docs = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/openapi.json") return Response.json(REST_DOCUMENT);
      if (path === "/moved") return new Response(null, { status: 301, headers: { location: "/openapi.json" } });
      if (path === "/yaml") return new Response("openapi: 3.0.3\n", { headers: { "content-type": "application/yaml" } });
      if (path === "/huge") return new Response(new Uint8Array(MAX_DOCUMENT_BYTES + 1).fill(32));
      if (path === "/slow") return new Promise<Response>(() => {});
      return new Response(null, { status: 404 });
    },
  });
  afterAll(() => docs.stop(true));
  const at = (path: string) => new URL(`http://127.0.0.1:${docs.port}${path}`);
  const why = (p: Promise<unknown>) =>
    p.then(
      () => [],
      (e: unknown) => (e instanceof DocumentRefused ? e.problems : [String(e)]),
    );

  test("fetched once and turned into the same tools as the document given inline", async () => {
    const fetched = await toolsFromOpenApi("fixture", await fetchDocument(at("/openapi.json"), 2_000));
    expect(JSON.stringify(fetched.tools)).toBe(JSON.stringify(tools));
  });

  test("a redirect, an error status, a non-JSON body, an oversized one or a silent server: refused with the reason", async () => {
    expect(await why(fetchDocument(at("/moved"), 2_000))).toEqual(["openapi_url answered a redirect (301): give the URL it points to"]);
    expect(await why(fetchDocument(at("/missing"), 2_000))).toEqual(["openapi_url answered HTTP 404"]);
    expect(await why(fetchDocument(at("/yaml"), 2_000))).toEqual(["the document at openapi_url is not JSON in UTF-8"]);
    expect(await why(fetchDocument(at("/huge"), 2_000))).toEqual([`the document at openapi_url is over ${MAX_DOCUMENT_BYTES} bytes`]);
    expect(await why(fetchDocument(at("/slow"), 200))).toEqual(["openapi_url did not answer within 200 ms"]);
    expect(await why(fetchDocument(new URL("file:///etc/passwd"), 200))).toEqual(["openapi_url is not an http or https URL"]);
  });
});
