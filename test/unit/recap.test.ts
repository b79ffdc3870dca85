// The recap renderer, piece by piece: amounts, the column rule, sanitising, layout, the
// approver's own lines. The expected texts here are written by hand from the issue, not
// rendered, so they hold the renderer to the contract.
import { describe, expect, test } from "bun:test";
import type { Ask, StoredAsk } from "../../src/core/asks.ts";
import { currencyCodes, minorUnits } from "../../src/core/money/currency.ts";
import { formatAmount } from "../../src/core/money/format.ts";
import {
  AGENT_LABEL,
  expiryText,
  fitHost,
  renderConsoleNote,
  renderDecision,
  renderListLine,
  renderNarrowNotice,
  renderRecap,
} from "../../src/core/recap/render.ts";
import { escapeCodePoint, sanitize, sanitizeAtoms } from "../../src/core/recap/sanitize.ts";
import { codePointWidth, textWidth } from "../../src/core/recap/width.ts";
import { columns } from "../helpers/recap-invariants.ts";
import { SAMPLE_ACCOUNT, SAMPLE_PAY } from "../helpers/sample-asks.ts";

const NOW = new Date("2026-11-30T03:00:00.000Z");
const in_ = (ms: number): Date => new Date(NOW.getTime() + ms);
const PAY = SAMPLE_PAY;
const ACCOUNT = SAMPLE_ACCOUNT;
const stored = (ask: Ask, extra: Partial<StoredAsk> = {}): StoredAsk => ({
  ask,
  created_at: NOW,
  expires_at: in_(600_000),
  state: "pending",
  ...extra,
});

describe("formatAmount", () => {
  test("shows exactly the currency's minor-unit decimals", () => {
    expect(formatAmount("19", "EUR")).toBe("19.00");
    expect(formatAmount("19.5", "EUR")).toBe("19.50");
    expect(formatAmount("19.00", "EUR")).toBe("19.00");
    expect(formatAmount("0.01", "USD")).toBe("0.01");
    expect(formatAmount("1500", "JPY")).toBe("1500");
    expect(formatAmount("7", "KWD")).toBe("7.000");
    expect(formatAmount("1.2", "CLF")).toBe("1.2000");
  });
  test("is string arithmetic: no float rounding even for huge or fine amounts", () => {
    expect(formatAmount("12345678901234567890.1", "EUR")).toBe("12345678901234567890.10");
    expect(formatAmount("0.3", "EUR")).toBe("0.30");
    expect(formatAmount("9007199254740993", "JPY")).toBe("9007199254740993");
  });
  test("refuses what the field rules refuse, rather than round or guess", () => {
    for (const [amount, currency] of [
      ["19.001", "EUR"],
      ["1.5", "JPY"],
      ["-1", "EUR"],
      ["+1", "EUR"],
      ["1e3", "EUR"],
      ["01", "EUR"],
      ["1.", "EUR"],
      [".5", "EUR"],
      ["1,00", "EUR"],
      [" 1", "EUR"],
      ["", "EUR"],
      ["1", "XXX"],
      ["1", "eur"],
      ["\uff11", "EUR"],
    ] as const) {
      expect(() => formatAmount(amount, currency)).toThrow(RangeError);
    }
  });
  test("every current currency formats 1 with its own decimals", () => {
    for (const code of currencyCodes()) {
      const d = minorUnits(code);
      expect(formatAmount("1", code)).toBe(d === 0 ? "1" : `1.${"0".repeat(d)}`);
    }
  });
});

describe("the column rule", () => {
  test("printable ASCII is one column, every other code point two", () => {
    expect(codePointWidth(0x20)).toBe(1);
    expect(codePointWidth(0x7e)).toBe(1);
    expect(codePointWidth(0x7f)).toBe(2);
    expect(codePointWidth(0x1f)).toBe(2);
    expect(codePointWidth(0xe9)).toBe(2);
    expect(textWidth("abc")).toBe(3);
    expect(textWidth("日本")).toBe(4);
    expect(textWidth("\u{1f642}")).toBe(2); // one code point, two UTF-16 units
    expect(textWidth("e\u0301")).toBe(3); // a mark counts, though it draws on its base
    expect(textWidth("\ud800x")).toBe(3); // a lone surrogate is one code point
    expect(textWidth("\udc00\ud800")).toBe(4);
  });
});

describe("sanitize", () => {
  const hidden: [string, number[]][] = [
    ["C0", [0x0, 0x7, 0x8, 0x9, 0xa, 0xd, 0x1b, 0x1f]],
    ["DEL and C1", [0x7f, 0x80, 0x85, 0x9b, 0x9f]],
    ["bidi", [0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x061c]],
    ["zero width", [0x200b, 0x200c, 0x200d, 0x2060, 0xfeff]],
    ["tags", [0xe0001, 0xe0020, 0xe0041, 0xe007f]],
    ["other Cf", [0xad, 0x600, 0x2062, 0x180e, 0xfff9, 0xfffb, 0x110bd, 0x1d173]],
    ["line separators", [0x2028, 0x2029]],
    ["Hangul fillers", [0x115f, 0x1160, 0x3164, 0xffa0]],
    ["variation selectors", [0xfe00, 0xfe0f, 0xe0100, 0xe01ef, 0x180b]],
    ["blank glyphs", [0x2800, 0x1d159, 0x034f]],
    ["private use", [0xe000, 0xf8ff, 0xf0000, 0x10fffd]],
    ["unassigned and noncharacters", [0x378, 0xfdd0, 0xfffe, 0xffff, 0x10ffff]],
    ["backslash and look-alikes", [0x5c, 0x2216, 0x29f5, 0xfe68, 0xff3c]],
  ];
  for (const [name, list] of hidden) {
    test(`escapes ${name}`, () => {
      for (const cp of list) expect(sanitize(`a${String.fromCodePoint(cp)}b`)).toBe(`a\\u{${cp.toString(16)}}b`);
    });
  }
  test("escapes lone surrogates, keeps a pair as one character", () => {
    expect(sanitize("a\ud800b\udfffc")).toBe("a\\u{d800}b\\u{dfff}c");
    expect(sanitize("\udfff\ud800")).toBe("\\u{dfff}\\u{d800}");
    expect(sanitize("\ud83d\ude42")).toBe("\u{1f642}");
  });
  test("escape form: lowercase hex, no padding", () => {
    expect(escapeCodePoint(0)).toBe("\\u{0}");
    expect(escapeCodePoint(0x202e)).toBe("\\u{202e}");
    expect(escapeCodePoint(0x10ffff)).toBe("\\u{10ffff}");
  });
  test("a literal escape in agent text cannot pass for one", () => {
    expect(sanitize("\\u{202e}")).toBe("\\u{5c}u{202e}");
  });
  test("shows letters, CJK, emoji and symbols as themselves", () => {
    for (const s of [
      "Example Shop",
      "Café Zürich",
      "株式会社",
      "\u{1f642}\u{1f44d}\u{1f3fd}",
      "\u{1f1ea}\u{1f1fa}",
      "€ £ ¥ © ™",
      "Ωμέγα",
      "שלום",
      "مرحبا",
      "한국",
    ]) {
      expect(sanitize(s)).toBe(s);
    }
  });
  test("space runs of any Unicode space become one ASCII space; ends trimmed", () => {
    expect(sanitize("a \u00a0\u3000\u2003\u2009\u202f\u205f\u1680 b")).toBe("a b");
    expect(sanitize("\u00a0 a  b \u3000")).toBe("a b");
    expect(sanitize(" \u00a0 ")).toBe("");
    expect(sanitize("")).toBe("");
  });
  test("at most two combining marks on one base; a mark without a base is escaped", () => {
    expect(sanitize("e\u0301\u0302")).toBe("e\u0301\u0302");
    expect(sanitize("e\u0301\u0302\u0303\u0304")).toBe("e\u0301\u0302\\u{303}\\u{304}");
    expect(sanitize("\u0301")).toBe("\\u{301}");
    expect(sanitize("a \u0301")).toBe("a \\u{301}");
    expect(sanitize("\u200b\u0301")).toBe("\\u{200b}\\u{301}");
    // Marks count per base: a new base starts a new count.
    expect(sanitize("a\u0301\u0302b\u0301\u0302")).toBe("a\u0301\u0302b\u0301\u0302");
  });
  test("atoms keep a base with its marks and an escape whole, with their widths", () => {
    expect(sanitizeAtoms("e\u0301\u0302x\u202e日")).toEqual({ atoms: ["e\u0301\u0302", "x", "\\u{202e}", "日"], widths: [5, 1, 8, 2] });
  });
  test("every code point: what may hide is escaped, nothing else vanishes", () => {
    const hiddenRe = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}]/u;
    const bad: number[] = [];
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      const ch = String.fromCodePoint(cp);
      const shown = sanitize(`a${ch}`);
      const escaped = shown === `a${escapeCodePoint(cp)}`;
      if (hiddenRe.test(ch) && !escaped) bad.push(cp);
      // A space separator becomes a (trimmed) space; everything else is itself or escaped.
      else if (!escaped && shown !== `a${ch}` && !(/\p{Zs}/u.test(ch) && shown === "a")) bad.push(cp);
    }
    expect(bad.map((cp) => cp.toString(16))).toEqual([]);
  });
});

describe("renderRecap", () => {
  test("a pay ask, exactly as in the issue", () => {
    expect(renderRecap(stored(PAY), NOW)).toEqual([
      "[ask K7Q2M4XZ3A] PAY 19.00 EUR",
      "  to:        Example Shop",
      "  card:      card-2",
      "  site:      shop.example",
      "  checkout:  https://shop.example/checkout/123",
      "  reason:    (from the agent, unchecked) renew the domain",
      "  expires:   in 10 min",
      "  approving: PAY 19.00 EUR at shop.example",
      "  approve K7Q2M4XZ3A   or   deny K7Q2M4XZ3A",
    ]);
  });
  test("an account ask", () => {
    expect(renderRecap(stored(ACCOUNT), NOW)).toEqual([
      "[ask P3N8W2R6T0] ACCOUNT at provider.example",
      "  provider:  https://provider.example/signup",
      "  identity:  work",
      "  site:      provider.example",
      "  reason:    (from the agent, unchecked) newsletter",
      "  expires:   in 10 min",
      "  approving: ACCOUNT at provider.example",
      "  approve P3N8W2R6T0   or   deny P3N8W2R6T0",
    ]);
  });
  test("absent optional fields say (none) in the approver's words", () => {
    const rows = renderRecap(stored({ kind: "account", approval_id: "P3N8W2R6T0", provider_url: "https://p.example/" }), NOW);
    expect(rows).toContain("  identity:  (none)");
    expect(rows).toContain("  reason:    (none)");
  });
  test("the amount shows the currency's decimals in the header and the approving row", () => {
    const rows = renderRecap(stored({ ...PAY, amount: "19.5" }), NOW);
    expect(rows[0]).toBe("[ask K7Q2M4XZ3A] PAY 19.50 EUR");
    expect(rows).toContain("  approving: PAY 19.50 EUR at shop.example");
  });
  test("a long reason wraps on `  >` rows aligned with the value, never over 76 columns", () => {
    const rows = renderRecap(stored({ ...PAY, reason: "a".repeat(35 + 63 + 5) }), NOW);
    expect(rows[5]).toBe(`  reason:    ${AGENT_LABEL} ${"a".repeat(35)}`);
    expect(rows[6]).toBe(`  >          ${"a".repeat(63)}`);
    expect(rows[7]).toBe(`  >          ${"a".repeat(5)}`);
    expect(columns(rows[5]!)).toBe(76);
    expect(columns(rows[6]!)).toBe(76);
  });
  test("a wide character that does not fit moves whole to the next row", () => {
    const rows = renderRecap(stored({ ...PAY, merchant: `${"a".repeat(62)}日` }), NOW);
    expect(rows[1]).toBe(`  to:        ${"a".repeat(62)}`);
    expect(rows[2]).toBe("  >          日");
  });
  test("an escape is never split across rows", () => {
    const rows = renderRecap(stored({ ...PAY, merchant: `${"a".repeat(60)}\u202e` }), NOW);
    expect(rows[1]).toBe(`  to:        ${"a".repeat(60)}`);
    expect(rows[2]).toBe("  >          \\u{202e}");
  });
  test("a space at a cut moves to the next row, where it shows", () => {
    const rows = renderRecap(stored({ ...PAY, merchant: `${"a".repeat(63)} b` }), NOW);
    expect(rows[1]).toBe(`  to:        ${"a".repeat(63)}`);
    expect(rows[2]).toBe("  >           b");
  });
  test("a URL's percent-escape stays whole on one row", () => {
    const url = `https://shop.example/${"p".repeat(40)}%C3%A9`;
    const rows = renderRecap(stored({ ...PAY, checkout_url: url }), NOW);
    expect(rows[4]).toBe(`  checkout:  https://shop.example/${"p".repeat(40)}`);
    expect(rows[5]).toBe("  >          %C3%A9");
  });
  test("a look-alike host shows in punycode in the site and approving rows", () => {
    const rows = renderRecap(stored({ ...PAY, checkout_url: new URL("https://shop.ex\u0430mple/").href }), NOW);
    expect(rows).toContain("  site:      shop.xn--exmple-4nf");
    expect(rows).toContain("  approving: PAY 19.00 EUR at shop.xn--exmple-4nf");
  });
  test("a host too long for its row shows by its end", () => {
    const host = `shop.example.${"a".repeat(60)}.evil.com`;
    const rows = renderRecap(stored({ ...PAY, checkout_url: `https://${host}/` }), NOW);
    expect(rows).toContain("  site:      ....evil.com");
    expect(rows).toContain("  approving: PAY 19.00 EUR at ....evil.com");
    expect(rows.join("\n")).not.toContain("site:      shop.example");
  });
  test("the width is clamped to 76 and refused below 60", () => {
    expect(renderRecap(stored(PAY), NOW, 200)).toEqual(renderRecap(stored(PAY), NOW));
    const narrow = renderRecap(stored({ ...PAY, reason: "r".repeat(200) }), NOW, 60);
    for (const row of narrow) expect(columns(row)).toBeLessThanOrEqual(60);
    expect(() => renderRecap(stored(PAY), NOW, 59)).toThrow(RangeError);
    expect(() => renderRecap(stored(PAY), NOW, 70.5)).toThrow(RangeError);
  });
  test("refuses an id that is not the minted form, rather than print it", () => {
    for (const id of ["K7Q2M4XZ3", "K7Q2M4XZ3AA", "k7q2m4xz3a", "K7Q2M4XZ3I", "K7Q2M4XZ3\n"]) {
      expect(() => renderRecap(stored({ ...PAY, approval_id: id }), NOW)).toThrow(RangeError);
    }
  });
  test("is a pure function of (stored ask, now, width)", () => {
    const s = stored({ ...PAY, reason: "x\u202ey".repeat(50) });
    const copy = structuredClone(s);
    expect(renderRecap(s, NOW)).toEqual(renderRecap(s, NOW));
    expect(s).toEqual(copy);
    // The real clock plays no part: an ask long expired by the wall clock still reads by `now`.
    const old = stored(PAY, { created_at: new Date("2001-01-01T00:00:00Z"), expires_at: new Date("2001-01-01T00:10:00Z") });
    expect(renderRecap(old, new Date("2001-01-01T00:00:00Z"))).toContain("  expires:   in 10 min");
  });
});

describe("expiry wording", () => {
  test("seconds rounded up, minutes and hours rounded down, then expired", () => {
    expect(expiryText(in_(600_000), NOW)).toBe("in 10 min");
    expect(expiryText(in_(599_999), NOW)).toBe("in 9 min");
    expect(expiryText(in_(60_000), NOW)).toBe("in 1 min");
    expect(expiryText(in_(59_999), NOW)).toBe("in 60 s");
    expect(expiryText(in_(45_000), NOW)).toBe("in 45 s");
    expect(expiryText(in_(44_001), NOW)).toBe("in 45 s");
    expect(expiryText(in_(1), NOW)).toBe("in 1 s");
    expect(expiryText(in_(0), NOW)).toBe("expired");
    expect(expiryText(in_(-5), NOW)).toBe("expired");
    expect(expiryText(in_(3_600_000), NOW)).toBe("in 1 h");
    expect(expiryText(in_(2 * 3_600_000 + 5 * 60_000 + 59_000), NOW)).toBe("in 2 h 5 min");
    expect(expiryText(in_(48 * 3_600_000 - 1), NOW)).toBe("in 47 h 59 min");
    expect(expiryText(in_(48 * 3_600_000), NOW)).toBe("in 2 d");
    expect(expiryText(in_(9_999 * 86_400_000), NOW)).toBe("in 9999 d");
    expect(expiryText(in_(600_000), NOW, "expired")).toBe("expired");
    expect(() => expiryText(new Date(Number.NaN), NOW)).toThrow(RangeError);
  });
});

describe("fitHost", () => {
  test("keeps a host that fits, cuts the start of one that does not, at a label where it can", () => {
    expect(fitHost("shop.example", 12)).toBe("shop.example");
    expect(fitHost("a.shop.example", 12)).toBe("....example");
    expect(fitHost("a.shop.example.com", 16)).toBe("....example.com");
    // Starting after a dot would leave one label only: cut inside the label instead.
    expect(fitHost("a-long-shop-name.example.com", 12)).toBe("....mple.com");
    expect(fitHost("shop.example.evil.com", 16)).toBe("....evil.com");
    expect(fitHost("x".repeat(30), 16)).toBe(`....${"x".repeat(12)}`);
    expect(fitHost("aaaa.bbbbbbbbbbbbbbbbbb", 16)).toBe(`....${"b".repeat(12)}`);
  });
  test("a host that is not plain ASCII is sanitised, counted by the width rule, and cut by atoms", () => {
    expect(fitHost("a\u202eb.example", 40)).toBe("a\\u{202e}b.example");
    expect(fitHost(`${"\u65e5".repeat(10)}.example`, 20)).toBe("....\u65e5\u65e5\u65e5\u65e5.example");
    expect(fitHost(`x.${"\u65e5".repeat(10)}`, 16)).toBe(`....${"\u65e5".repeat(6)}`);
    expect(fitHost(`x.${"\u202e".repeat(3)}`, 16)).toBe("....\\u{202e}");
  });
});

describe("decision, list, notices", () => {
  test("decision lines are the approver's own words", () => {
    expect(renderDecision(stored(PAY, { state: "approved", ref: "demo-3e40a688" }))).toEqual([
      "K7Q2M4XZ3A: approved: PAY 19.00 EUR at shop.example",
      "  demo-3e40a688: no money moved (reference approver)",
    ]);
    expect(renderDecision(stored(PAY, { state: "denied" }))).toEqual(["K7Q2M4XZ3A: denied: PAY 19.00 EUR at shop.example"]);
    expect(renderDecision(stored(ACCOUNT, { state: "denied" }))).toEqual(["P3N8W2R6T0: denied: ACCOUNT at provider.example"]);
    expect(renderDecision(stored(ACCOUNT, { state: "approved", ref: "demo-00000000" }))[0]).toBe("P3N8W2R6T0: approved: ACCOUNT at provider.example");
    expect(() => renderDecision(stored(PAY))).toThrow(RangeError);
    expect(() => renderDecision(stored(PAY, { state: "approved", ref: "demo-\n" }))).toThrow(RangeError);
    // A ref never shows a card number, even one of the safe form.
    expect(() => renderDecision(stored(PAY, { state: "approved", ref: "ref-4111111111111111" }))).toThrow(RangeError);
  });
  test("a decision line carries no agent words and stays within 76 columns", () => {
    const hostile = { ...PAY, merchant: "EVIL\u202e", reason: "approved: PAY 1.00 EUR", checkout_url: `https://${"h".repeat(60)}.${"k".repeat(60)}.example/` };
    for (const line of renderDecision(stored(hostile, { state: "approved", ref: "demo-3e40a688" }))) {
      expect(columns(line)).toBeLessThanOrEqual(76);
      expect(line).not.toContain("EVIL");
    }
    expect(renderDecision(stored(hostile, { state: "denied" }))[0]).toBe(`K7Q2M4XZ3A: denied: PAY 19.00 EUR at ....${"k".repeat(27)}.example`);
  });
  test("a list row: id, summary, expiry; no merchant or reason", () => {
    expect(renderListLine(stored(PAY), NOW)).toBe("K7Q2M4XZ3A  PAY 19.00 EUR at shop.example  expires in 10 min");
    expect(renderListLine(stored(ACCOUNT), in_(600_000))).toBe("P3N8W2R6T0  ACCOUNT at provider.example  expired");
    const long = renderListLine(stored({ ...PAY, amount: "123456789.99", checkout_url: `https://${"q".repeat(70)}.evil.example/` }), in_(570_000));
    expect(long).toBe("K7Q2M4XZ3A  PAY 123456789.99 EUR at ....evil.example  expires in 30 s");
    expect(columns(long)).toBeLessThanOrEqual(76);
    // The longest amount the default maximum allows (1000000 CLF, 4 decimals), far from expiry.
    // The longest amount every row holds (14 characters as shown), far from expiry.
    const far = stored(
      { ...PAY, amount: "999999999", currency: "CLF", checkout_url: "https://a-long-shop-name.example.com/" },
      { expires_at: in_(47 * 3_600_000 + 59 * 60_000) },
    );
    const row = renderListLine(far, NOW);
    expect(row).toBe("K7Q2M4XZ3A  PAY 999999999.0000 CLF at ....xample.com  expires in 47 h 59 min");
    expect(columns(row)).toBeLessThanOrEqual(76);
  });
  test("the narrow-terminal notice names the ids and asks for a wider terminal in short rows", () => {
    const rows = renderNarrowNotice(["K7Q2M4XZ3A", "P3N8W2R6T0"], 50);
    expect(rows).toEqual(["asks waiting: 2", "  K7Q2M4XZ3A", "  P3N8W2R6T0", "recaps need 76 columns;", "this terminal has 50.", "widen it to decide."]);
    const many = renderNarrowNotice(
      Array.from({ length: 12 }, () => "K7Q2M4XZ3A"),
      Number.NaN,
    );
    expect(many).toContain("  and 2 more");
    expect(many).toContain("this terminal has fewer.");
    for (const row of many) expect(columns(row)).toBeLessThanOrEqual(24);
    expect(() => renderNarrowNotice(["\u001b[2J"], 50)).toThrow(RangeError);
  });
  test("console notes about asks", () => {
    expect(renderConsoleNote({ kind: "already-decided", id: "K7Q2M4XZ3A", state: "approved" })).toBe("K7Q2M4XZ3A: already decided (approved)");
    expect(renderConsoleNote({ kind: "expired", id: "K7Q2M4XZ3A" })).toBe("K7Q2M4XZ3A: expired, nothing changed");
    expect(renderConsoleNote({ kind: "unknown-id", id: "K7Q2M4XZ3A" })).toBe("K7Q2M4XZ3A: no such ask");
    expect(renderConsoleNote({ kind: "not-an-id" })).toBe("not an ask id: ids are 10 characters, 0-9 and A-Z without I L O U");
    expect(renderConsoleNote({ kind: "none-pending" })).toBe("no pending asks");
    expect(() => renderConsoleNote({ kind: "expired", id: "x\u202e" })).toThrow(RangeError);
  });
});
