// Every recap vector in test/vectors/recap/ against the library, plus the vector grammar itself:
// a vector file that the parser would half-understand is worse than none.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { renderRecap } from "../../src/core/recap/render.ts";
import { recapViolations } from "../helpers/recap-invariants.ts";
import { formatRecapVector, parseRecapVector } from "../helpers/recap-vector.ts";

const DIR = join(import.meta.dir, "../vectors/recap");
const files = readdirSync(DIR)
  .filter((f) => f.endsWith(".vec"))
  .sort();

describe("recap vectors", () => {
  test("the set covers what the issue asks for", () => {
    const names = new Set(files.map((f) => f.slice(0, -4)));
    for (const name of [
      "pay-plain",
      "account-plain",
      "hidden-c0",
      "hidden-c1",
      "hidden-esc-sequence",
      "hidden-bidi",
      "hidden-zero-width",
      "hidden-tags",
      "hidden-cf",
      "hidden-hangul-filler",
      "hidden-variation-selector",
      "combining-stack",
      "wide-cjk",
      "wide-emoji",
      "host-lookalike",
      "host-long",
      "reason-500",
      "url-percent",
      "host-idn",
      "backslash",
      "spend-plain",
      "spend-cut",
      "spend-hostile",
      "spend-long-tool",
      "spend-max-price",
      "spend-width-60",
    ]) {
      expect(names).toContain(name);
    }
    // A fake block at every offset across the first two cuts of a reason (35 + 63 columns).
    for (let k = 0; k < 100; k++) expect(names).toContain(`fake-block-${String(k).padStart(3, "0")}`);
  });

  for (const file of files) {
    test(file, () => {
      const text = readFileSync(join(DIR, file), "utf8");
      const v = parseRecapVector(text);
      expect(renderRecap(v.stored, v.now, v.width)).toEqual(v.expected);
      // The expected lines themselves keep every rule, so a regenerated vector cannot bless a bug.
      expect(recapViolations(v.stored, v.expected, v.width)).toEqual([]);
      // The file is in the one canonical form the generator writes.
      expect(formatRecapVector(v)).toBe(text);
    });
  }

  test("a fake [ask ...] block never begins a row, at any offset", () => {
    let seen = 0;
    for (const file of files.filter((f) => f.startsWith("fake-block-"))) {
      const v = parseRecapVector(readFileSync(join(DIR, file), "utf8"));
      const rows = renderRecap(v.stored, v.now, v.width);
      expect(rows.filter((r) => r.startsWith("[ask ")).length).toBe(1);
      expect(rows.filter((r) => r.trimStart().startsWith("approving:")).length).toBe(1);
      expect(rows.filter((r) => r.trimStart().startsWith("approve ")).length).toBe(1);
      // Where the fake block lands on a continuation row's start, it sits after the marker.
      if (rows.some((r) => r.startsWith("  >          [ask "))) seen++;
    }
    expect(seen).toBeGreaterThanOrEqual(2);
  });
});

describe("recap vector grammar", () => {
  const good = readFileSync(join(DIR, "pay-plain.vec"), "utf8");
  const bad = (text: string, why: RegExp) => expect(() => parseRecapVector(text)).toThrow(why);

  test("the plain vector parses", () => {
    expect(parseRecapVector(good).stored.ask.approval_id).toBe("K7Q2M4XZ3A");
  });
  test("an unknown header fails", () => bad(`colour: "red"\n${good}`, /unknown header/));
  test("a header of the other kind fails", () =>
    bad(good.replace('kind: "pay"', 'kind: "account"\nprovider: "https://p.example/"'), /unknown header for account/));
  test("a repeated header fails", () => bad(`id: "K7Q2M4XZ3A"\n${good}`, /repeated header/));
  test("a missing header fails", () => bad(good.replace(/^currency: .*\n/m, ""), /missing header: currency/));
  test("a header that is not a JSON string fails", () => bad(good.replace('amount: "19.00"', "amount: 19.00"), /not a JSON string/));
  test("a malformed header line fails", () => bad(good.replace('kind: "pay"', 'kind:"pay"'), /malformed header/));
  test("no blank line, no expected lines, no final newline, a CR: all fail", () => {
    bad(good.replace("\n\n", "\n"), /blank line|malformed/);
    bad(good.slice(0, good.indexOf("\n\n") + 2), /no expected lines/);
    bad(good.slice(0, -1), /newline/);
    bad(good.replace("\n", "\r\n"), /carriage return/);
  });
  test("a spend vector takes a JSON integer price and a JSON boolean cut, and no reason", () => {
    const spend = readFileSync(join(DIR, "spend-plain.vec"), "utf8");
    expect(parseRecapVector(spend).stored.ask.kind).toBe("spend");
    bad(spend.replace("price: 1500", 'price: "1500"'), /price: not a JSON integer/);
    bad(spend.replace("cut: false", 'cut: "false"'), /cut: not a JSON boolean/);
    bad(spend.replace('kind: "spend"', 'kind: "spend"\nreason: "x"'), /unknown header for spend: reason/);
    bad(spend.replace(/^tool: .*\n/m, ""), /missing header: tool/);
  });
  test("a bad time or state fails", () => {
    bad(good.replace(/^now: .*$/m, 'now: "yesterday"'), /ISO 8601/);
    bad(good.replace('kind: "pay"', 'kind: "pay"\nstate: "maybe"'), /state/);
  });
});
