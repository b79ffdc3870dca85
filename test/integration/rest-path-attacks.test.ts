// A path parameter can never leave the operation's path (the bug class of CVE-2026-32871, where
// an OpenAPI-to-tool bridge let `../` in a parameter reach any endpoint with the provider's
// credential). Checked where it matters: on the path a real server sees after its own parsing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { RestUpstreamClient } from "../../src/adapters/rest-upstream/client.ts";
import { toolsFromOpenApi } from "../../src/core/rest/tools.ts";
import { NO_CREDENTIAL } from "../../src/core/upstream/credential.ts";
import { REST_DOCUMENT, type RestFixture, startRestFixture } from "../fixtures/rest-server.ts";

let fixture: RestFixture;
let client: RestUpstreamClient;

beforeAll(async () => {
  fixture = startRestFixture();
  const { tools } = await toolsFromOpenApi("fixture", REST_DOCUMENT);
  // base_url with a path of its own: the operation's path must stay under it too.
  client = new RestUpstreamClient({ name: "fixture", baseUrl: new URL(`${fixture.url}/api/v1`), tools, credential: NO_CREDENTIAL, timeoutMs: 5_000 });
});
afterAll(() => fixture.stop());

/** The segments of a path as the server parsed it, each decoded once. */
const segmentsOf = (path: string) => path.split("/").slice(1).map(decodeURIComponent);

const ATTACKS = [
  "../admin",
  "../../admin",
  "%2e%2e%2f",
  "%2e%2e/admin",
  "..%2fadmin",
  "a/b",
  "?x=",
  "#",
  "#/../admin",
  "..;/admin",
  "..\\admin",
  "\\",
  "/",
  "//evil.example/x",
  "%00",
  "\u0000",
  "é",
  ".%2e",
  "%2E%2E",
  "\uff0e\uff0e",
];

describe("the attacks of the report, through a real server", () => {
  test("each reaches nothing but the operation's path, with its value in one segment", async () => {
    for (const value of ATTACKS) {
      const from = fixture.seen.length;
      const answer = await client.call("getItem", { id: value });
      const seen = fixture.seen.slice(from);
      expect(seen).toHaveLength(1);
      expect(segmentsOf(seen[0]!.path)).toEqual(["api", "v1", "items", value]);
      expect(new URL(seen[0]!.target, "http://x").search).toBe("");
      expect(answer.kind).toBe("ok");
    }
  });

  test("a whole segment of '.', '..' or nothing never leaves the desk", async () => {
    const from = fixture.seen.length;
    for (const value of [".", "..", ""]) expect(await client.call("getItem", { id: value })).toEqual({ kind: "args_refused" });
    expect(fixture.seen.length).toBe(from);
  });

  test("two parameters: each stays in its own segment", async () => {
    const from = fixture.seen.length;
    expect((await client.call("getPart", { id: "../..", part: "../../admin" })).kind).toBe("ok");
    expect(segmentsOf(fixture.seen[from]!.path)).toEqual(["api", "v1", "items", "../..", "parts", "../../admin"]);
  });
});

describe("property: any string as a path parameter", () => {
  test("the server sees exactly the operation's segments, the value whole in its own", async () => {
    const value = fc.oneof(
      fc.string({ unit: "binary", minLength: 1 }),
      fc.string({ unit: fc.constantFrom("/", ".", "%", "2", "e", "f", "?", "#", ";", "\\", "\u0000", "&", "=", " ", "é", "a"), minLength: 1 }),
      fc.constantFrom(...ATTACKS),
    );
    await fc.assert(
      fc.asyncProperty(value, async (v) => {
        const from = fixture.seen.length;
        const answer = await client.call("getItem", { id: v });
        const seen = fixture.seen.slice(from);
        if (v === "." || v === ".." || !v.isWellFormed()) {
          expect(answer).toEqual({ kind: "args_refused" });
          expect(seen).toHaveLength(0);
          return;
        }
        expect(seen).toHaveLength(1);
        expect(segmentsOf(seen[0]!.path)).toEqual(["api", "v1", "items", v]);
        expect(answer.kind).toBe("ok");
      }),
      { numRuns: 400 },
    );
  });

  test("and every path the server ever saw in this file was the operation's", () => {
    for (const s of fixture.seen) expect(s.path).toMatch(/^\/api\/v1\/items\/[^/]+(\/parts\/[^/]+)?$/);
  });
});
