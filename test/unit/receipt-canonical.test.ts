// RFC 8785 canonical JSON: the RFC's own examples, its number table, key order by UTF-16 code
// units, and everything JCS refuses.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { CanonicalJsonError, canonicalJson, MAX_DEPTH } from "../../src/core/receipt/canonical.ts";
import { hashJson, sha256Hex } from "../../src/core/receipt/hash.ts";
import { canonicalReceipt, isCanonicalReceipt, OUTCOMES, type Receipt } from "../../src/core/receipt/types.ts";

// A double from its IEEE 754 bit pattern, as RFC 8785 Appendix B lists them.
function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

function problemOf(value: unknown): string {
  try {
    canonicalJson(value);
  } catch (err) {
    if (err instanceof CanonicalJsonError) return `${err.problem} at ${err.path}`;
    throw err;
  }
  return "accepted";
}

describe("canonicalJson (RFC 8785)", () => {
  test("the example of section 3.2.2: literals, numbers and string escapes", () => {
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",' +
        '"literals": [null, true, false]}',
    );
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' + '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  test("the sorting example of section 3.2.3: keys by UTF-16 code units, not code points", () => {
    const input = {
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis",
    };
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis",' +
        '"€":"Euro Sign","😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  test("numbers of Appendix B serialise as ES Number::toString", () => {
    const table: [string, string][] = [
      ["0000000000000000", "0"],
      ["8000000000000000", "0"], // -0
      ["0000000000000001", "5e-324"],
      ["8000000000000001", "-5e-324"],
      ["7fefffffffffffff", "1.7976931348623157e+308"],
      ["ffefffffffffffff", "-1.7976931348623157e+308"],
      ["4340000000000000", "9007199254740992"],
      ["c340000000000000", "-9007199254740992"],
      ["4430000000000000", "295147905179352830000"],
      ["44b52d02c7e14af5", "9.999999999999997e+22"],
      ["44b52d02c7e14af6", "1e+23"],
      ["444b1ae4d6e2ef4f", "999999999999999900000"],
      ["444b1ae4d6e2ef50", "1e+21"],
      ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
      ["3eb0c6f7a0b5ed8d", "0.000001"],
      ["41b3de4355555553", "333333333.3333332"],
      ["41b3de4355555555", "333333333.3333333"],
      ["41b3de4355555557", "333333333.33333343"],
      ["becbf647612f3696", "-0.0000033333333333333333"],
      ["43143ff3c1cb0959", "1424953923781206.2"],
    ];
    for (const [bits, text] of table) expect(`${bits} ${canonicalJson(fromBits(bits))}`).toBe(`${bits} ${text}`);
    expect(canonicalJson([1e21, 1e-7, -0, 1e20])).toBe("[1e+21,1e-7,0,100000000000000000000]");
  });

  test("escapes: controls as \\b \\t \\n \\f \\r or \\u00xx lowercase; U+2028, DEL and non-ASCII as is", () => {
    expect(canonicalJson('\b\t\n\f\r\u0000\u001f\u007f\u2028\u2029"\\/é')).toBe('"\\b\\t\\n\\f\\r\\u0000\\u001f\u007f\u2028\u2029\\"\\\\/é"');
  });

  test("nested arrays and objects keep array order and sort every object", () => {
    expect(canonicalJson({ b: [{ z: 1, a: 2 }, [], {}], a: null })).toBe('{"a":null,"b":[{"a":2,"z":1},[],{}]}');
  });

  test("the place as a JSON Pointer: escaped, and stopping at the object whose key is itself the problem", () => {
    const pointerOf = (value: unknown) => {
      try {
        canonicalJson(value);
      } catch (err) {
        if (err instanceof CanonicalJsonError) return err.pointer;
      }
      throw new Error("expected a CanonicalJsonError");
    };
    expect(pointerOf("\ud800")).toBe("");
    expect(pointerOf({ a: ["ok", "x\udc00"] })).toBe("/a/1");
    expect(pointerOf({ "a/b": { "c~d": [Number.NaN] } })).toBe("/a~1b/c~0d/0");
    // The bad key never shows in the pointer (a desk answer carries it back to the caller).
    expect(pointerOf({ a: { "secret-\udbff": 1 } })).toBe("/a");
  });

  test("refuses what JCS refuses, naming the place", () => {
    expect(problemOf("\ud800")).toBe("LONE_SURROGATE at $");
    expect(problemOf({ a: ["ok", "x\udc00"] })).toBe("LONE_SURROGATE at $.a[1]");
    expect(problemOf({ "\udbff": 1 })).toBe("LONE_SURROGATE at $.\udbff");
    expect(problemOf(Number.NaN)).toBe("NUMBER_NOT_FINITE at $");
    expect(problemOf({ n: [Number.POSITIVE_INFINITY] })).toBe("NUMBER_NOT_FINITE at $.n[0]");
    expect(problemOf({ a: -Infinity })).toBe("NUMBER_NOT_FINITE at $.a");
    expect(problemOf(undefined)).toBe("UNSUPPORTED_TYPE at $");
    expect(problemOf({ a: undefined })).toBe("UNSUPPORTED_TYPE at $.a");
    expect(problemOf([undefined])).toBe("UNSUPPORTED_TYPE at $[0]");
    expect(problemOf(new Array(1))).toBe("UNSUPPORTED_TYPE at $[0]");
    expect(problemOf({ f: () => 1 })).toBe("UNSUPPORTED_TYPE at $.f");
    expect(problemOf(10n)).toBe("UNSUPPORTED_TYPE at $");
    expect(problemOf(Symbol("s"))).toBe("UNSUPPORTED_TYPE at $");
    expect(problemOf({ d: new Date(0) })).toBe("UNSUPPORTED_TYPE at $.d");
    expect(problemOf(new Map())).toBe("UNSUPPORTED_TYPE at $");
    expect(problemOf(new (class Point {})())).toBe("UNSUPPORTED_TYPE at $");
    expect(problemOf(new Uint8Array(2))).toBe("UNSUPPORTED_TYPE at $");
  });

  test("a well-formed surrogate pair and a null-prototype object are accepted", () => {
    expect(canonicalJson("\ud83d\ude00")).toBe('"😀"');
    const bare = Object.create(null) as Record<string, number>;
    bare.b = 1;
    bare.a = 2;
    expect(canonicalJson(bare)).toBe('{"a":2,"b":1}');
  });

  test("a cycle or deep nesting stops with TOO_DEEP, not a stack overflow", () => {
    const loop: Record<string, unknown> = {};
    loop.self = loop;
    expect(problemOf(loop)).toStartWith("TOO_DEEP at $.self.self");
    let deep: unknown = 1;
    for (let i = 0; i < MAX_DEPTH; i++) deep = [deep];
    expect(problemOf(deep)).toBe("accepted");
    expect(problemOf([deep])).toStartWith("TOO_DEEP at $[0]");
  });

  test("__proto__ as a JSON key is data, kept and sorted like any other", () => {
    expect(canonicalJson(JSON.parse('{"z":1,"__proto__":{"x":1}}'))).toBe('{"__proto__":{"x":1},"z":1}');
  });

  test("property: parsing the output gives the input back, whatever the key order", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = canonicalJson(value);
        const back = JSON.parse(text);
        expect(canonicalJson(back)).toBe(text);
        expect(back).toEqual(JSON.parse(JSON.stringify(value)));
        const reversed = JSON.parse(JSON.stringify(value), (_k, v) =>
          v && typeof v === "object" && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
        );
        expect(canonicalJson(reversed)).toBe(text);
      }),
      { numRuns: 300 },
    );
  });
});

describe("hashes", () => {
  test("sha256Hex is lowercase hex SHA-256 of the UTF-8 bytes", () => {
    expect(sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(sha256Hex("é")).toBe(sha256Hex(new Uint8Array([0xc3, 0xa9])));
  });

  test("hashJson covers the canonical form, so key order does not change it", () => {
    expect(hashJson({ b: 1, a: [1, 2] })).toBe(hashJson({ a: [1, 2], b: 1 }));
    expect(hashJson({ a: 1 })).toBe(sha256Hex('{"a":1}'));
    expect(hashJson({ a: 1 })).not.toBe(hashJson({ a: 2 }));
  });
});

describe("canonicalReceipt (the receipt's own fast path)", () => {
  const hex = fc.stringMatching(/^[0-9a-f]{64}$/);
  const money = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
  // Any code point, plus lone surrogate halves now and then.
  const anyUnit = fc.oneof(
    { weight: 9, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
    { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)) },
  );
  const receipt: fc.Arbitrary<Receipt> = fc.record({
    v: fc.constant(1 as const),
    id: fc.string({ minLength: 1, unit: anyUnit }),
    kid: fc.string({ minLength: 1 }),
    issued_at: fc.constant("2026-11-30T00:00:00.000Z"),
    org_id: fc.string({ minLength: 1, unit: "grapheme" }),
    key_id: fc.string({ minLength: 1 }),
    tool: fc.string({ minLength: 1 }),
    outcome: fc.constantFrom(...OUTCOMES),
    http_status: fc.integer({ min: 100, max: 599 }),
    price_mc: money,
    amount_mc: money,
    upstream_cost_mc: money,
    remaining_mc: money,
    period: fc.constantFrom("none", "2026-11", "2026-11-30"),
    params_sha256: hex,
    result_sha256: fc.option(hex, { nil: null }),
    seq: fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
    prev_sha256: fc.option(hex, { nil: null }),
  });

  test("property: equal to canonicalJson, and null exactly where canonicalJson throws", () => {
    fc.assert(
      fc.property(receipt, (r) => {
        let expected: string | null;
        try {
          expected = canonicalJson(r);
        } catch {
          expected = null;
        }
        expect(canonicalReceipt(r)).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });

  test("property: isCanonicalReceipt(r, text) exactly when canonicalReceipt(r) === text, for the text and its near misses", () => {
    const nearMiss = (text: string) =>
      fc.oneof(
        fc.constant(text),
        fc.nat({ max: text.length - 1 }).map((i) => text.slice(0, i) + text.slice(i + 1)),
        fc.tuple(fc.nat({ max: text.length }), fc.constantFrom(" ", "0", "}", '"', ",")).map(([i, c]) => text.slice(0, i) + c + text.slice(i)),
        fc.tuple(fc.nat({ max: text.length - 1 }), fc.constantFrom("1", "a", "{", "\\")).map(([i, c]) => text.slice(0, i) + c + text.slice(i + 1)),
      );
    fc.assert(
      fc.property(
        receipt.chain((r) => fc.tuple(fc.constant(r), nearMiss(canonicalReceipt(r) ?? JSON.stringify(r)))),
        ([r, text]) => {
          expect(isCanonicalReceipt(r, text)).toBe(canonicalReceipt(r) === text);
        },
      ),
      { numRuns: 1000 },
    );
  });

  test("a lone surrogate in a field gives null", () => {
    const r = fc.sample(receipt, { numRuns: 1, seed: 7 })[0]!;
    expect(canonicalReceipt({ ...r, org_id: "org\ud800" })).toBeNull();
  });
});
