// The card-number net: disguised numbers are caught, near misses pass, and the scanner agrees
// with a slow, obvious model of the rule written here from scratch.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { containsCardNumber, luhnValid } from "../../src/core/money/card-net.ts";

// An independent Luhn (sum from the right, doubling every second digit).
function luhn(digits: string): boolean {
  let sum = 0;
  const rev = [...digits].reverse();
  rev.forEach((c, k) => {
    const d = Number(c) * (k % 2 === 1 ? 2 : 1);
    sum += d > 9 ? d - 9 : d;
  });
  return sum % 10 === 0;
}

/** `body` with the Luhn check digit appended. */
function withCheckDigit(body: string): string {
  for (let c = 0; c <= 9; c++) if (luhn(body + c)) return body + c;
  throw new Error("unreachable");
}

// Zero code points of some digit sets (each set is a contiguous 0..9 run).
const ZEROS = {
  ascii: 0x30,
  fullWidth: 0xff10,
  arabicIndic: 0x660,
  extendedArabicIndic: 0x6f0,
  devanagari: 0x966,
  bengali: 0x9e6,
  thai: 0xe50,
  mathBold: 0x1d7ce,
  mathDoubleStruck: 0x1d7d8,
  adlam: 0x1e950,
  osmanya: 0x104a0,
} as const;
const inScript = (digits: string, zero: number): string =>
  [...digits].map((c) => String.fromCodePoint(zero + Number(c))).join("");

// The slow model: NFKC, cut at letters, keep digits (value by set), test every 13-19 window;
// again on the percent-decoded text.
function digitValue(ch: string): number | undefined {
  const cp = ch.codePointAt(0)!;
  for (const zero of Object.values(ZEROS)) if (cp >= zero && cp <= zero + 9) return cp - zero;
  if (/\p{Nd}/u.test(ch)) throw new Error(`model lacks the digit set of U+${cp.toString(16)}`);
  return undefined;
}
function modelScan(normal: string): boolean {
  for (const piece of normal.split(/\p{L}/u)) {
    const digits = [...piece].map(digitValue).filter((d) => d !== undefined).join("");
    for (let len = 13; len <= 19; len++) {
      for (let i = 0; i + len <= digits.length; i++) if (luhn(digits.slice(i, i + len))) return true;
    }
  }
  return false;
}
function model(text: string): boolean {
  const normal = text.normalize("NFKC");
  if (modelScan(normal.replace(/%[0-9a-f]{2}/gi, " "))) return true;
  if (!/%[0-9a-f]{2}/i.test(normal)) return false;
  const decoded = normal.replace(/(?:%[0-9a-f]{2})+/gi, (run) =>
    new TextDecoder().decode(new Uint8Array(run.slice(1).split("%").map((h) => Number.parseInt(h, 16)))),
  );
  return modelScan(decoded.normalize("NFKC"));
}

const VISA16 = "4111111111111111";
const AMEX15 = "378282246310005";
const VISA13 = "4222222222222";
const LONG19 = withCheckDigit("623456789012345678");
const ALL = [VISA13, AMEX15, VISA16, withCheckDigit("5555444433332222".slice(0, 16)), withCheckDigit("12345678901234567"), LONG19];

describe("test fixtures", () => {
  test("the sample numbers are Luhn-valid and 13-19 digits long, by the test's own Luhn", () => {
    for (const n of ALL) {
      expect(luhn(n)).toBe(true);
      expect(n.length).toBeGreaterThanOrEqual(13);
      expect(n.length).toBeLessThanOrEqual(19);
    }
    expect(new Set(ALL.map((n) => n.length))).toEqual(new Set([13, 15, 16, 17, 18, 19]));
  });

  test("luhnValid agrees with the test's Luhn", () => {
    fc.assert(fc.property(fc.stringMatching(/^[0-9]{1,25}$/), (d) => luhnValid(d) === luhn(d)), { numRuns: 2000 });
    expect(luhnValid("")).toBe(false);
    expect(luhnValid("4111 1111")).toBe(false);
  });
});

describe("caught: Luhn-valid 13-19 digits in any disguise", () => {
  const disguises: Record<string, (n: string) => string> = {
    plain: (n) => n,
    "in a sentence": (n) => `please use ${n} for this one`,
    spaces: (n) => n.replace(/(\d{4})(?=\d)/g, "$1 "),
    dots: (n) => n.replace(/(\d{4})(?=\d)/g, "$1."),
    dashes: (n) => n.replace(/(\d{4})(?=\d)/g, "$1-"),
    slashes: (n) => n.replace(/(\d{3})(?=\d)/g, "$1/"),
    underscores: (n) => n.replace(/(\d{2})(?=\d)/g, "$1_"),
    commas: (n) => n.replace(/(\d{4})(?=\d)/g, "$1,"),
    "a separator between every digit": (n) => [...n].join(" - "),
    "no-break and thin spaces": (n) => n.replace(/(\d{4})(?=\d)/g, "$1\u00a0\u2009"),
    "ideographic space": (n) => n.replace(/(\d{4})(?=\d)/g, "$1\u3000"),
    "zero-width and bidi characters": (n) => [...n].join("\u200b\u2066"),
    "soft hyphens": (n) => [...n].join("\u00ad"),
    "newlines and tabs": (n) => n.replace(/(\d{4})(?=\d)/g, "$1\n\t"),
    "combining marks": (n) => [...n].join("\u0301"),
    emoji: (n) => n.replace(/(\d{4})(?=\d)/g, "$1🙂"),
    "inside a longer digit run": (n) => `9${n}4`,
    "inside a much longer run": (n) => `31415926${n}27182818`,
    "between letters": (n) => `x${n}y`,
    "a handle-looking string": (n) => `card-${n}`,
    "full-width digits": (n) => inScript(n, ZEROS.fullWidth),
    "Arabic-Indic digits": (n) => inScript(n, ZEROS.arabicIndic),
    "Extended Arabic-Indic digits": (n) => inScript(n, ZEROS.extendedArabicIndic),
    "Devanagari digits": (n) => inScript(n, ZEROS.devanagari),
    "Thai digits": (n) => inScript(n, ZEROS.thai),
    "mathematical bold digits": (n) => inScript(n, ZEROS.mathBold),
    "Adlam digits": (n) => inScript(n, ZEROS.adlam),
    "superscript digits": (n) => [...n].map((c) => "⁰¹²³⁴⁵⁶⁷⁸⁹"[Number(c)]).join(""),
    "circled digits": (n) => [...n].map((c) => (c === "0" ? "⓪" : String.fromCodePoint(0x2460 + Number(c) - 1))).join(""),
    "mixed scripts": (n) => [...n].map((c, i) => inScript(c, Object.values(ZEROS)[i % 11]!)).join(""),
    "in a URL path": (n) => `https://shop.example/checkout/${n}`,
    "in a URL query": (n) => `https://shop.example/pay?pan=${n.replace(/(\d{4})(?=\d)/g, "$1-")}&x=1`,
    "percent-encoded spaces in a URL": (n) => `https://shop.example/${n.replace(/(\d{4})(?=\d)/g, "$1%20")}`,
    "fully percent-encoded": (n) => `https://shop.example/?q=${[...n].map((c) => `%3${c}`).join("")}`,
    "percent-encoded full-width digits": (n) => encodeURIComponent(inScript(n, ZEROS.fullWidth)),
    "percent-encoded superscript digits": (n) => encodeURIComponent([...n].map((c) => "⁰¹²³⁴⁵⁶⁷⁸⁹"[Number(c)]).join("")),
    "in the host": (n) => `https://${n}.example/`,
  };
  for (const [name, disguise] of Object.entries(disguises)) {
    test(name, () => {
      for (const n of ALL) {
        const text = disguise(n);
        expect({ text, caught: containsCardNumber(text) }).toEqual({ text, caught: true });
      }
    });
  }
});

describe("passed: near misses", () => {
  test("a number that fails Luhn (and has no Luhn-valid 13-19 window inside)", () => {
    // Inner windows count, so a wrong check digit alone is not always a miss: the model decides.
    for (const n of ALL) {
      const wrong = n.slice(0, -1) + ((Number(n.at(-1)) + 1) % 10);
      expect(luhn(wrong)).toBe(false);
      expect(containsCardNumber(wrong)).toBe(model(wrong));
    }
    for (const miss of ["4222222222220", "378282246310000", "4111111111111113", "4111 1111 1111 1118", "٤١١١١١١١١١١١١١١٥"]) {
      expect(model(miss)).toBe(false);
      expect(containsCardNumber(miss)).toBe(false);
    }
  });

  test("Luhn-valid 12 digits, and shorter", () => {
    const twelve = withCheckDigit("41111111111");
    expect(twelve).toHaveLength(12);
    expect(containsCardNumber(twelve)).toBe(false);
    expect(containsCardNumber(`${twelve} `)).toBe(false);
    expect(containsCardNumber("0")).toBe(false);
    expect(containsCardNumber("")).toBe(false);
  });

  test("a run of 20+ digits with no Luhn-valid 13-19 window", () => {
    // Every window of ones sums to 19, 21, 22, 24, 25, 27 or 28 (lengths 13..19): never 0 mod 10.
    const ones = "1".repeat(40);
    const noWindow = (run: string) => {
      for (let len = 13; len <= 19; len++) for (let i = 0; i + len <= run.length; i++) expect(luhn(run.slice(i, i + len))).toBe(false);
    };
    noWindow(ones);
    expect(containsCardNumber(ones)).toBe(false);
    expect(containsCardNumber(ones.replace(/(1{4})/g, "$1 "))).toBe(false);

    // A less regular one: search digit strings from a fixed seed until no window passes.
    let state = 12345;
    const next = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return state % 10;
    };
    let run = "";
    for (let tries = 0; tries < 200_000; tries++) {
      run = Array.from({ length: 24 }, next).join("");
      if (!model(run)) break;
    }
    expect(run).toHaveLength(24);
    noWindow(run);
    expect(containsCardNumber(run)).toBe(false);
    expect(containsCardNumber(inScript(run, ZEROS.arabicIndic))).toBe(false);
  });

  test("letters split a number into short runs", () => {
    expect(containsCardNumber("4111 1111 x 1111 1111")).toBe(false);
    expect(containsCardNumber("4111111a111111111")).toBe(false);
    expect(containsCardNumber("ref 4111-1111 then 1111-1111")).toBe(false);
    // Letters of any script break a run, as ASCII letters do.
    expect(containsCardNumber("4111 1111 é 1111 1111")).toBe(false);
    expect(containsCardNumber("٤١١١ ١١١١ ж ١١١١ ١١١١")).toBe(false);
    expect(containsCardNumber("41111111漢11111111")).toBe(false);
  });

  test("ordinary text, ids and URLs", () => {
    for (const text of [
      "Renew the domain example.org for 2 years, 19.00 EUR",
      "K7Q2M4XZ3A",
      "demo-0a1b2c3d",
      "https://shop.example/checkout/123?item=42&qty=2",
      "card-2",
      "order 2024-113 on 11/30",
      "٣ كتب",
    ]) {
      expect(containsCardNumber(text)).toBe(false);
    }
  });

  test("the hex digits of percent escapes are not digits of the text", () => {
    // Read digit by digit, the escapes would make 12 + 2 * 6 = 19 digits with a Luhn-valid window.
    const url = "https://shop.example/search?q=1%202%203%204%205%206%207";
    expect(model(url.replace(/%[0-9A-F]{2}/g, (e) => e.slice(1)))).toBe(true);
    expect(containsCardNumber(url)).toBe(false);
    expect(containsCardNumber("https://shop.example/a?at=2024%2D01%2D15&b=%E2%82%AC9")).toBe(false);
    // An escape's hex letters do not end a run either: %2D is a dash.
    expect(containsCardNumber("4111%2D1111%2D1111%2D1111")).toBe(true);
    expect(containsCardNumber("４１１１％２０１１１１%201111%201111")).toBe(true);
  });

  test("lone surrogates and odd code points do not throw", () => {
    expect(containsCardNumber("\ud800 4111\udfff")).toBe(false);
    expect(containsCardNumber(`\ud800${VISA16}\udc00`)).toBe(true);
    expect(containsCardNumber("%zz%4")).toBe(false);
  });
});

describe("properties", () => {
  const anyNumber = fc
    .tuple(fc.integer({ min: 13, max: 19 }), fc.stringMatching(/^[0-9]{18}$/))
    .map(([len, body]) => withCheckDigit(body.slice(0, len - 1)));
  const separator = fc.constantFrom(" ", ".", "-", "/", "_", ",", ":", "\u00a0", "\u2009", "\u3000", "\u200b", "\u00ad", "\n", "·", "+", "'");
  const script = fc.constantFrom(...Object.values(ZEROS));

  test("any Luhn-valid 13-19 digit number with random separators, in random text, is caught", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 40 }),
        anyNumber,
        fc.array(fc.array(separator, { maxLength: 3 }), { minLength: 19, maxLength: 19 }),
        fc.array(script, { minLength: 19, maxLength: 19 }),
        fc.string({ unit: "binary", maxLength: 40 }),
        (before, number, gaps, scripts, after) => {
          const disguised = [...number].map((c, i) => inScript(c, scripts[i]!) + (i < number.length - 1 ? gaps[i]!.join("") : "")).join("");
          return containsCardNumber(before + disguised + after);
        },
      ),
      { numRuns: 10_000 },
    );
  });

  test("the scanner agrees with the slow model on random digit-heavy text", () => {
    const piece = fc.oneof(
      { weight: 12, arbitrary: fc.constantFrom(..."0123456789") },
      { weight: 2, arbitrary: separator },
      { weight: 1, arbitrary: fc.constantFrom("a", "Z", "é", "ж", "漢", "ǅ", "ʰ") },
      { weight: 1, arbitrary: fc.constantFrom("%3", "%20", "%4", "%", "%F", "%2D", "%25", "%EF%BC%91", "％", "１", "٣", "۴", "४") },
    );
    let caught = 0;
    fc.assert(
      fc.property(fc.array(piece, { minLength: 5, maxLength: 60, size: "max" }), (pieces) => {
        const text = pieces.join("");
        const verdict = containsCardNumber(text);
        if (verdict) caught++;
        return verdict === model(text);
      }),
      { numRuns: 10_000 },
    );
    // Both answers were exercised often enough for the comparison to mean something.
    expect(caught).toBeGreaterThan(2000);
    expect(caught).toBeLessThan(8000);
  });
});
