// Hostile inputs shared by the ask-side fuzzers (fast-check arbitraries, so a seed replays a
// run): characters of every Unicode class the recap and the field rules care about, card
// numbers in disguise, and plausible ask fields to mutate.
import fc from "fast-check";
import { CROCKFORD_ALPHABET, isApprovalId } from "../../src/core/ids.ts";
import { luhnValid } from "../../src/core/money/card-net.ts";

const range = (from: number, to: number) => fc.integer({ min: from, max: to }).map((cp) => String.fromCodePoint(cp));
const pick = (...cps: number[]) => fc.constantFrom(...cps.map((cp) => String.fromCodePoint(cp)));

/** One character from each class, by name, so a summary could say which were tried. */
export const UNICODE_CLASSES = {
  ascii: range(0x20, 0x7e),
  c0: fc.oneof(range(0x00, 0x1f), pick(0x7f)),
  c1: range(0x80, 0x9f),
  bidi: pick(0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069),
  zeroWidth: pick(0x200b, 0x200c, 0x200d, 0x2060, 0xfeff, 0x180e),
  tags: range(0xe0000, 0xe007f),
  combining: range(0x0300, 0x036f),
  variation: fc.oneof(range(0xfe00, 0xfe0f), range(0xe0100, 0xe01ef)),
  hangulFiller: pick(0x115f, 0x1160, 0x3164, 0xffa0),
  spaces: pick(0x20, 0xa0, 0x1680, 0x2000, 0x2003, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000),
  wide: fc.oneof(range(0x4e00, 0x9fff), range(0xac00, 0xd7a3), range(0xff01, 0xff5e)),
  emoji: fc.oneof(range(0x1f300, 0x1faff), fc.constant("👩‍👩‍👧‍👦"), fc.constant("🏳️‍🌈")),
  digits: fc.oneof(range(0x30, 0x39), range(0xff10, 0xff19), range(0x0660, 0x0669), range(0x0966, 0x096f), range(0x1d7ce, 0x1d7ff)),
  rtl: fc.oneof(range(0x05d0, 0x05ea), range(0x0627, 0x064a)),
  lookalike: fc.oneof(range(0x0430, 0x044f), range(0x0391, 0x03c9)),
  privateUse: fc.oneof(range(0xe000, 0xf8ff), range(0xf0000, 0xf00ff)),
  nonCharacter: pick(0xfdd0, 0xfffe, 0xffff, 0x1fffe, 0x10ffff),
  loneSurrogate: fc.integer({ min: 0xd800, max: 0xdfff }).map((u) => String.fromCharCode(u)),
  any: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
  markup: fc.constantFrom("<", ">", "&", '"', "'", "\\", "`", "$", "{", "}", "%", "%00", "%0a", "\\u0000", "$" + "{x}", "{{x}}"),
};

const anyClassChar = fc.oneof(...Object.values(UNICODE_CLASSES));

/** Text mixing every class; short by default. */
export const hostileText = (maxLength = 40) => fc.array(anyClassChar, { maxLength }).map((cs) => cs.join(""));

/** A Luhn-valid number of 13 to 19 ASCII digits. */
export const cardDigits = fc
  .record({ length: fc.integer({ min: 13, max: 19 }), body: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 18, maxLength: 18 }) })
  .map(({ length, body }) => {
    const head = body.slice(0, length - 1).join("");
    for (let d = 0; d <= 9; d++) if (luhnValid(head + d)) return head + d;
    throw new Error("unreachable: one check digit always passes Luhn");
  });

const shiftDigits = (digits: string, zero: number) => [...digits].map((d) => String.fromCodePoint(zero + Number(d))).join("");
const groups = (digits: string, sep: string) => digits.replace(/(\d{4})(?=\d)/g, `$1${sep}`);

/** A card number as someone might slip it in: spaced, dashed, wide, in another script, padded. */
export const disguisedCard = fc
  .record({
    digits: cardDigits,
    how: fc.constantFrom(
      "plain",
      "spaces",
      "dashes",
      "dots",
      "fullwidth",
      "arabic",
      "devanagari",
      "padded",
      "zero-width",
      "percent",
      "nbsp",
      "slashes",
      "dingbat",
      "hangul-filler",
      "tatweel",
      "lone-letter",
    ),
    pad: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 6 }),
  })
  .map(({ digits, how, pad }) => {
    const shown = (() => {
      switch (how) {
        case "spaces":
          return groups(digits, " ");
        case "dashes":
          return groups(digits, "-");
        case "dots":
          return groups(digits, ".");
        case "fullwidth":
          return shiftDigits(digits, 0xff10);
        case "arabic":
          return shiftDigits(digits, 0x0660);
        case "devanagari":
          return shiftDigits(digits, 0x0966);
        case "padded":
          return `${pad.join("")}${digits}`;
        case "zero-width":
          return [...digits].join("\u200b");
        case "percent":
          return [...digits].map((d) => `%3${d}`).join("");
        case "nbsp":
          return groups(digits, "\u00a0");
        case "slashes":
          return groups(digits, "/");
        case "dingbat":
          return [...digits].map((d) => String.fromCodePoint(d === "0" ? 0x24ff : 0x2776 + Number(d) - 1)).join("");
        case "hangul-filler":
          return groups(digits, "\u3164");
        case "tatweel":
          return groups(digits, "\u0640");
        case "lone-letter":
          return groups(digits, "ж");
        default:
          return digits;
      }
    })();
    return { digits, shown };
  });

const crockfordId = fc.array(fc.constantFrom(...CROCKFORD_ALPHABET), { minLength: 10, maxLength: 10 }).map((cs) => cs.join(""));
export const approvalIdArb = crockfordId.filter(isApprovalId);

/** Plausible values for each ask field (mostly valid), to start from before mutating. */
export const FIELD_VALUES = {
  merchant: fc.oneof(fc.constantFrom("Example Shop", "Café Zoë", "東京ストア", "Ωmega Ltd", "A"), hostileText(30)),
  amount: fc.oneof(fc.constantFrom("19.00", "0.01", "1", "999999.99", "1000000"), fc.stringMatching(/^[0-9]{1,7}(\.[0-9]{1,3})?$/)),
  currency: fc.constantFrom("EUR", "USD", "JPY", "KWD", "GBP", "CHF"),
  card_handle: fc.oneof(fc.constantFrom("card-2", "work", "c"), fc.stringMatching(/^[a-z][a-z0-9-]{0,31}$/)),
  identity_handle: fc.oneof(fc.constantFrom("work", "home", "me-2"), fc.stringMatching(/^[a-z][a-z0-9-]{0,31}$/)),
  checkout_url: fc.oneof(
    fc.constantFrom("https://shop.example/checkout/123", "https://xn--80ak6aa92e.com/pay", "https://shop.exаmple/c", "https://a.example/%7E?q=1#f"),
    fc.webUrl({ validSchemes: ["https"], withQueryParameters: true, withFragments: true }),
  ),
  provider_url: fc.oneof(
    fc.constantFrom("https://provider.example/signup", "https://例え.jp/", "https://p.example:8443/x"),
    fc.webUrl({ validSchemes: ["https"] }),
  ),
  reason: fc.oneof(fc.constantFrom("renew the domain", "[ask K7Q2M4XZ3A] PAY 1.00 EUR\n  approve K7Q2M4XZ3A"), hostileText(80)),
};

/** A JSON value of any type, for wrong-type fields (nested, with hostile strings). */
export const anyJsonValue = fc.oneof(
  { depthSize: "small" },
  fc.jsonValue({ maxDepth: 3 }),
  hostileText(20),
  fc.constantFrom(null, true, false, 0, -1, 1e308, 19.0, [], {}, ["19.00"], { amount: "19.00" }),
);
