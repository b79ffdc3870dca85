// Input-schema checks run in linear time and mean what JSON Schema says: patterns on RE2 with
// ECMA-262's meaning, uniqueItems by canonical key, and what RE2 cannot run refused up front.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { compileArgsSchema, SchemaRefused } from "../../src/core/desk/args.ts";
import { JS_SPACE_RANGES, linearRegExp, PatternRefused, toRe2Syntax } from "../../src/core/desk/schema-regex.ts";

const onString = (pattern: string) => compileArgsSchema({ type: "object", properties: { s: { type: "string", pattern } } });
const ms = (fn: () => void) => {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
};

describe("patterns run on RE2 with ECMA-262's meaning", () => {
  test("the rewritten \\s is exactly ECMA-262's \\s, over every code point", () => {
    const inRanges = (cp: number) => JS_SPACE_RANGES.some(([a, b]) => cp >= a && cp <= b);
    const differ: number[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      if (/\s/u.test(String.fromCodePoint(cp)) !== inRanges(cp)) differ.push(cp);
    }
    expect(differ).toEqual([]);
  });

  // Each pattern is one where RE2's syntax or meaning differs from ECMA-262's, or a plain one.
  const PATTERNS = [
    "^[a-z]+$",
    "^\\d{3}-\\d{4}$",
    "^(a+)+$",
    "^.$",
    "a.b",
    "^\\s*$",
    "^\\S+$",
    "[\\s\\d]",
    "[^\\s]",
    "[\\S]",
    "^[\\b]$",
    "\\bword\\b",
    "^\\u{1F600}$",
    "^\\uD83D\\uDE00$",
    "^\\p{Lu}+$",
    "^\\p{Script=Greek}+$",
    "^\\p{gc=Nd}$",
    "(?<year>\\d{4})-(?<month>\\d{2})",
    "^[]$",
    "^[^]$",
    "^[[:alpha:]$",
    "^\\/path$",
    "^a{2,3}$",
    "x*?y",
    "^\\cJ$",
    "^\\0$",
    "^[\\-a]$",
    "^[^\\n]*$",
  ];
  const ALPHABET = [
    "a",
    "b",
    "A",
    "z",
    "0",
    "9",
    " ",
    "\t",
    "\n",
    "\r",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\u3000",
    "\u200b",
    "\b",
    "\u0000",
    "😀",
    "α",
    "Ω",
    "-",
    "/",
    "[",
    ":",
    "_",
    "é",
  ];

  test("RE2 and ECMA-262 agree on every pattern, for chosen and random strings", () => {
    const samples = [
      "",
      "a",
      "aa",
      "aaa!",
      "ab",
      "a\nb",
      "a\rb",
      "a\u2028b",
      "axb",
      " ",
      "\u00a0",
      "\ufeff",
      "😀",
      "\uD83D\uDE00",
      "ΑΒΓ",
      "ABC",
      "1234-56",
      "555-1234",
      "\b",
      "\u0000",
      "\n",
      "[",
      ":",
      "/path",
      "word",
      "a word b",
      "2026-12",
    ];
    for (const pattern of PATTERNS) {
      const js = new RegExp(pattern, "u");
      const re2 = linearRegExp(pattern, "u");
      for (const s of samples) expect([pattern, s, re2.test(s)]).toEqual([pattern, s, js.test(s)]);
    }
    fc.assert(
      fc.property(fc.constantFrom(...PATTERNS), fc.array(fc.constantFrom(...ALPHABET), { maxLength: 12 }), (pattern, chars) => {
        const s = chars.join("");
        expect([pattern, s, linearRegExp(pattern, "u").test(s)]).toEqual([pattern, s, new RegExp(pattern, "u").test(s)]);
      }),
      { numRuns: 3000 },
    );
  });

  test("what needs a backtracking engine, or is no ECMA-262 pattern, is refused with the reason", () => {
    const refused = (p: string) => {
      try {
        toRe2Syntax(p);
        linearRegExp(p, "u");
        return "compiled";
      } catch (err) {
        return err instanceof PatternRefused ? err.why : `threw ${String(err)}`;
      }
    };
    expect(refused("(a)\\1")).toBe("a backreference needs a backtracking engine");
    expect(refused("\\k<n>(?<n>a)")).toBe("a backreference needs a backtracking engine");
    expect(refused("a(?=b)")).toBe("a lookaround needs a backtracking engine");
    expect(refused("a(?!b)")).toBe("a lookaround needs a backtracking engine");
    expect(refused("(?<=a)b")).toBe("a lookaround needs a backtracking engine");
    expect(refused("(?<!a)b")).toBe("a lookaround needs a backtracking engine");
    expect(refused("a{1001}")).toBe("the linear-time engine cannot run it (invalid repeat count)");
    expect(refused("[a")).toBe("not an ECMA-262 regular expression");
    expect(refused("\\Qa\\E")).toBe("not an ECMA-262 regular expression");
    // A schema holding one is refused as a whole, with the reason kind the operator is told.
    for (const p of ["(a)\\1", "a(?=b)", "[a"]) {
      expect(() => onString(p)).toThrow(SchemaRefused);
      try {
        onString(p);
      } catch (err) {
        expect((err as SchemaRefused).reason).toBe("pattern");
      }
    }
    for (const where of [{ patternProperties: { "(a)\\1": { type: "integer" } } }, { propertyNames: { pattern: "(?=x)" } }]) {
      expect(() => compileArgsSchema({ type: "object", ...where })).toThrow(SchemaRefused);
    }
  });

  test("catastrophic patterns run in linear time, on pattern, patternProperties and propertyNames", () => {
    const hostile = `${"a".repeat(100_000)}!`;
    const pattern = onString("^(a+)+$");
    expect(ms(() => expect(pattern({ s: hostile })).toEqual([{ path: "/s", rule: "pattern" }]))).toBeLessThan(500);
    const keys = compileArgsSchema({ type: "object", patternProperties: { "^(a+)+$": { type: "integer" } }, propertyNames: { pattern: "^(a|aa)+$" } });
    const refusedKey = [
      { path: "/", rule: "pattern" },
      { path: "/", rule: "propertyNames" },
    ];
    expect(ms(() => expect(keys({ [hostile]: 1 })).toEqual(refusedKey))).toBeLessThan(500);
    expect(keys({ aaaa: "x" })).toEqual([{ path: "/aaaa", rule: "type" }]);
  });

  test("each pattern of a schema is its own (Ajv keeps one compiled pattern per distinct text)", () => {
    const check = compileArgsSchema({ type: "object", properties: { a: { type: "string", pattern: "^a$" }, b: { type: "string", pattern: "^b$" } } });
    expect(check({ a: "a", b: "b" })).toEqual([]);
    expect(check({ a: "b", b: "a" })).toEqual([
      { path: "/a", rule: "pattern" },
      { path: "/b", rule: "pattern" },
    ]);
  });
});

describe("uniqueItems compares items by canonical key", () => {
  const unique = compileArgsSchema({ type: "object", properties: { xs: { type: "array", uniqueItems: true } } });

  test("equal as JSON values, whatever the key order; distinct across types", () => {
    expect(
      unique({
        xs: [
          { a: 1, b: [1, { c: 2, d: 3 }] },
          { b: [1, { d: 3, c: 2 }], a: 1 },
        ],
      }),
    ).toEqual([{ path: "/xs", rule: "uniqueItems" }]);
    expect(unique({ xs: [1, 1.0] })).toEqual([{ path: "/xs", rule: "uniqueItems" }]);
    expect(unique({ xs: [0, -0] })).toEqual([{ path: "/xs", rule: "uniqueItems" }]);
    expect(unique({ xs: [1, "1", [1], { "1": 1 }, true, null, "true", "null"] })).toEqual([]);
    expect(
      unique({
        xs: [
          [1, 2],
          [2, 1],
        ],
      }),
    ).toEqual([]);
    expect(compileArgsSchema({ type: "object", properties: { xs: { type: "array", uniqueItems: false } } })({ xs: [1, 1] })).toEqual([]);
  });

  test("100,000 distinct objects are checked in linear time", () => {
    const xs = Array.from({ length: 100_000 }, (_, i) => ({ a: i, b: [i] }));
    expect(ms(() => expect(unique({ xs })).toEqual([]))).toBeLessThan(2000);
  });
});
