// Building a REST request from base_url, a stored operation and the agent's arguments (pure): a
// path parameter is always exactly one segment, the URL never leaves base_url's origin and path.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { RestOperation, RestParameter } from "../../src/core/rest/operation.ts";
import { buildRequest, encodeStrict, parseBaseUrl, parseTemplate } from "../../src/core/rest/request.ts";

const BASE = new URL("https://api.example/v2/");

const param = (name: string, where: RestParameter["in"], extra: Partial<RestParameter> = {}): RestParameter => ({
  name,
  in: where,
  arg: name,
  required: where === "path",
  style: where === "query" ? "form" : "simple",
  explode: where === "query",
  ...extra,
});

const ITEM: RestOperation = { method: "get", path: "/items/{id}/detail", parameters: [param("id", "path")], accept: "application/json" };

function built(op: RestOperation, args: Record<string, unknown>, base = BASE) {
  const r = buildRequest(base, op, args);
  if (!r.ok) throw new Error(`refused: ${JSON.stringify(r.problems)}`);
  return r.request;
}

function problems(op: RestOperation, args: Record<string, unknown>) {
  const r = buildRequest(BASE, op, args);
  return r.ok ? [] : r.problems;
}

/** Any string, also ones made of the characters URL parsers treat specially. */
const hostile = fc.oneof(
  fc.string({ unit: "binary" }),
  fc.string({ unit: fc.constantFrom("/", ".", "%", "2", "e", "E", "?", "#", ";", "\\", "\u0000", "&", "=", "+", " ", "é", "\u2215", "\uff0e", "a") }),
  fc.constantFrom("../admin", "%2e%2e%2f", "a/b", "?x=", "#", "..%2f", ".%2e", "%2e.", "\\..\\admin", "..;/admin", "/", "//evil.example", "%00", "\u0000"),
);

describe("path parameters", () => {
  test("each attack stays inside its one segment", () => {
    for (const value of ["../admin", "%2e%2e%2f", "a/b", "?x=", "#", "..;/x", "a\\b", "\u0000", "é/ü", "..%2f..%2fadmin"]) {
      const { url } = built(ITEM, { id: value });
      const segments = url.pathname.split("/");
      expect(segments).toHaveLength(5);
      expect(segments.slice(0, 3)).toEqual(["", "v2", "items"]);
      expect(segments[4]).toBe("detail");
      expect(decodeURIComponent(segments[3]!)).toBe(value);
      expect(url.search).toBe("");
      expect(url.hash).toBe("");
      expect(url.origin).toBe("https://api.example");
    }
  });

  test("every byte outside unreserved is encoded", () => {
    expect(encodeStrict("a-Z_9.~")).toBe("a-Z_9.~");
    expect(encodeStrict("../admin")).toBe("..%2Fadmin");
    expect(encodeStrict("%2e%2e%2f")).toBe("%252e%252e%252f");
    expect(encodeStrict("?x=#;\\ ")).toBe("%3Fx%3D%23%3B%5C%20");
    expect(encodeStrict("\u0000é")).toBe("%00%C3%A9");
  });

  test("'', '.' and '..' as a whole segment are refused (a parser would move or drop them)", () => {
    for (const value of ["", ".", ".."]) expect(problems(ITEM, { id: value })).toEqual([{ path: "/id", rule: "path_segment" }]);
    expect(built(ITEM, { id: "..." }).url.pathname).toBe("/v2/items/.../detail");
    expect(built(ITEM, { id: ".a" }).url.pathname).toBe("/v2/items/.a/detail");
  });

  test("a segment made of a parameter and literal text is judged whole", () => {
    const named: RestOperation = { method: "get", path: "/files/{name}.{ext}", parameters: [param("name", "path"), param("ext", "path")], accept: "*/*" };
    expect(built(named, { name: "..", ext: "" }).url.pathname).toBe("/v2/files/...");
    expect(problems(named, { name: ".", ext: "" })).toEqual([{ path: "/ext", rule: "path_segment" }]);
  });

  test("a lone surrogate has no UTF-8 form: refused, not replaced", () => {
    expect(problems(ITEM, { id: "a\ud800" })).toEqual([{ path: "/id", rule: "encoding" }]);
  });

  test("numbers, booleans, arrays and objects (style simple)", () => {
    expect(built(ITEM, { id: 42 }).url.pathname).toBe("/v2/items/42/detail");
    expect(built(ITEM, { id: true }).url.pathname).toBe("/v2/items/true/detail");
    expect(built(ITEM, { id: ["a,b", "c/d"] }).url.pathname).toBe("/v2/items/a%2Cb,c%2Fd/detail");
    expect(built(ITEM, { id: { k: "v/w" } }).url.pathname).toBe("/v2/items/k,v%2Fw/detail");
    const exploded: RestOperation = { ...ITEM, parameters: [param("id", "path", { explode: true })] };
    expect(built(exploded, { id: { k: "v", "=": "x" } }).url.pathname).toBe("/v2/items/k=v,%3D=x/detail");
    expect(problems(ITEM, { id: [["nested"]] })).toEqual([{ path: "/id", rule: "style" }]);
    expect(problems(ITEM, { id: null })).toEqual([{ path: "/id", rule: "type" }]);
    expect(problems(ITEM, {})).toEqual([{ path: "/id", rule: "required" }]);
  });

  test("property: for any string the URL has exactly the operation's segments, before and after a reparse", () => {
    fc.assert(
      fc.property(hostile, (value) => {
        const r = buildRequest(BASE, ITEM, { id: value });
        if (!r.ok) {
          // Refused only for what has no single-segment form.
          expect(value === "" || value === "." || value === ".." || !value.isWellFormed()).toBe(true);
          return;
        }
        for (const url of [r.request.url, new URL(r.request.url.href), new URL(r.request.url.pathname, "http://other.example")]) {
          const segments = url.pathname.split("/");
          expect(segments.length).toBe(5);
          expect(segments[1]).toBe("v2");
          expect(segments[2]).toBe("items");
          expect(segments[4]).toBe("detail");
          expect(decodeURIComponent(segments[3]!)).toBe(value);
        }
        expect(r.request.url.origin).toBe("https://api.example");
        expect(r.request.url.search + r.request.url.hash).toBe("");
      }),
      { numRuns: 3000 },
    );
  });
});

describe("query parameters", () => {
  const q = (extra: Partial<RestParameter>): RestOperation => ({
    method: "get",
    path: "/search",
    parameters: [param("tag", "query", extra)],
    accept: "application/json",
  });

  test("form, explode (OpenAPI's default): repeated names", () => {
    expect(built(q({}), { tag: ["a b", "c&d=e"] }).url.search).toBe("?tag=a%20b&tag=c%26d%3De");
    expect(built(q({}), { tag: { x: "1", y: "2" } }).url.search).toBe("?x=1&y=2");
    expect(built(q({}), { tag: "?#/" }).url.search).toBe("?tag=%3F%23%2F");
  });

  test("form without explode, spaceDelimited, pipeDelimited, deepObject", () => {
    expect(built(q({ explode: false }), { tag: ["a", "b,c"] }).url.search).toBe("?tag=a,b%2Cc");
    expect(built(q({ explode: false }), { tag: { x: "1" } }).url.search).toBe("?tag=x,1");
    expect(built(q({ style: "spaceDelimited", explode: false }), { tag: ["a", "b"] }).url.search).toBe("?tag=a%20b");
    expect(built(q({ style: "pipeDelimited", explode: false }), { tag: ["a", "b"] }).url.search).toBe("?tag=a%7Cb");
    expect(built(q({ style: "deepObject", explode: true }), { tag: { "a]": "1" } }).url.search).toBe("?tag%5Ba%5D%5D=1");
  });

  test("optional ones absent or null are left out; nested values are refused", () => {
    expect(built(q({}), {}).url.search).toBe("");
    expect(built(q({}), { tag: null }).url.search).toBe("");
    expect(problems(q({}), { tag: [{ a: 1 }] })).toEqual([{ path: "/tag", rule: "style" }]);
  });

  test("property: any value stays inside its own query pair", () => {
    fc.assert(
      fc.property(hostile, (value) => {
        const r = buildRequest(BASE, q({}), { tag: value });
        if (!r.ok) return expect(value.isWellFormed()).toBe(false);
        const params = new URL(r.request.url.href).searchParams;
        expect([...params.keys()]).toEqual(["tag"]);
        expect(params.get("tag")).toBe(value);
        expect(r.request.url.pathname).toBe("/v2/search");
      }),
      { numRuns: 2000 },
    );
  });
});

describe("header parameters", () => {
  const h: RestOperation = { method: "get", path: "/x", parameters: [param("X-Trace", "header")], accept: "application/json" };

  test("valid values are sent; anything a runtime would split, trim or mangle is refused", () => {
    expect(built(h, { "X-Trace": "abc 123" }).headers.get("x-trace")).toBe("abc 123");
    expect(built(h, { "X-Trace": ["a", "b"] }).headers.get("x-trace")).toBe("a,b");
    for (const bad of ["a\r\nX-Admin: 1", "a\nb", " lead", "trail ", "é", "\u0000", "a\tb"]) {
      expect(problems(h, { "X-Trace": bad })).toEqual([{ path: "/X-Trace", rule: "header_value" }]);
    }
  });
});

describe("body, accept and the URL", () => {
  const post: RestOperation = {
    method: "post",
    path: "/pets",
    parameters: [],
    body: { arg: "body", mediaType: "application/merge-patch+json", required: true },
    accept: "application/json",
  };

  test("the body is the JSON of `body`, with the document's media type", () => {
    const r = built(post, { body: { name: "rex", tags: ["a"] } });
    expect(r.method).toBe("POST");
    expect(r.body).toBe('{"name":"rex","tags":["a"]}');
    expect(r.headers.get("content-type")).toBe("application/merge-patch+json");
    expect(r.headers.get("accept")).toBe("application/json");
    expect(problems(post, {})).toEqual([{ path: "/body", rule: "required" }]);
  });

  test("base_url's path is kept, with or without a trailing slash", () => {
    expect(built(ITEM, { id: "1" }, new URL("https://api.example/v2")).url.href).toBe("https://api.example/v2/items/1/detail");
    expect(built(ITEM, { id: "1" }, new URL("https://api.example/")).url.href).toBe("https://api.example/items/1/detail");
    expect(built({ ...ITEM, path: "/", parameters: [] }, {}, new URL("https://api.example/v2/")).url.href).toBe("https://api.example/v2/");
  });

  test("base_url: http(s) only, no credentials, query or fragment", () => {
    expect(parseBaseUrl("https://api.example/v1")).toBeInstanceOf(URL);
    for (const bad of ["ftp://x/", "https://u:p@x/", "https://x/?a=1", "https://x/#f", "https://x/?", "not a url", `https://x/${"a".repeat(2048)}`]) {
      expect(typeof parseBaseUrl(bad)).toBe("string");
    }
  });

  test("path templates: literal text must already be a path", () => {
    expect(parseTemplate("/pets/{id}")).toEqual([[{ literal: "pets" }], [{ param: "id" }]]);
    expect(parseTemplate("/a/")).toEqual([[{ literal: "a" }], []]);
    for (const bad of ["pets", "/a/../b", "/a/./b", "/a//b", "/a?x={x}", "/a#f", "/a%2e%2e", "/é", "/{x", "/x}", "/{}", "/a b"]) {
      expect(typeof parseTemplate(bad)).toBe("string");
    }
  });
});
