import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { checkAmount, compareDecimals, DEFAULT_MAX_AMOUNT, isPlainDecimal } from "../../src/core/money/amount.ts";

describe("checkAmount", () => {
  test("good amounts per currency decimals: EUR 2, JPY 0, KWD 3, CLF 4", () => {
    for (const [amount, currency] of [
      ["19.00", "EUR"],
      ["19", "EUR"],
      ["19.5", "EUR"],
      ["0.01", "EUR"],
      ["0.50", "EUR"],
      ["19", "JPY"],
      ["1", "JPY"],
      ["1.234", "KWD"],
      ["0.001", "KWD"],
      ["1.2345", "CLF"],
    ] as const) {
      expect({ amount, currency, code: checkAmount(amount, currency) }).toEqual({ amount, currency, code: undefined });
    }
  });

  test("too many decimals for the currency", () => {
    for (const [amount, currency] of [
      ["19.0", "JPY"],
      ["19.000", "EUR"],
      ["0.001", "EUR"],
      ["1.2345", "KWD"],
      ["1.00000", "CLF"],
    ] as const) {
      expect({ amount, currency, code: checkAmount(amount, currency) }).toEqual({ amount, currency, code: "AMOUNT_INVALID" });
    }
  });

  test("malformed amounts are AMOUNT_INVALID", () => {
    const bad: unknown[] = [
      "0",
      "0.00",
      "0.0",
      "00.5",
      "01",
      "007",
      "-1",
      "+1",
      "1e3",
      "1E3",
      "1.",
      ".5",
      " 1",
      "1 ",
      "1 000",
      "1,00",
      "1_000",
      "",
      "١٩",
      "１９",
      "19.0\u200b",
      "0x10",
      "Infinity",
      "NaN",
      "1.2.3",
      19,
      19.0,
      0,
      null,
      undefined,
      true,
      {},
      ["19"],
      19n,
    ];
    for (const amount of bad) {
      expect({ amount: String(amount), code: checkAmount(amount, "EUR") }).toEqual({ amount: String(amount), code: "AMOUNT_INVALID" });
    }
  });

  test("the maximum: default 1000000 major units, inclusive, compared exactly", () => {
    expect(DEFAULT_MAX_AMOUNT).toBe("1000000");
    expect(checkAmount("1000000", "EUR")).toBeUndefined();
    expect(checkAmount("1000000.00", "EUR")).toBeUndefined();
    expect(checkAmount("1000000.01", "EUR")).toBe("AMOUNT_TOO_LARGE");
    expect(checkAmount("1000001", "JPY")).toBe("AMOUNT_TOO_LARGE");
    expect(checkAmount("999999.999", "KWD")).toBeUndefined();
    expect(checkAmount("1000000.001", "KWD")).toBe("AMOUNT_TOO_LARGE");
    expect(checkAmount(`1${"0".repeat(5000)}`, "EUR")).toBe("AMOUNT_TOO_LARGE");
    // A float would call these equal (9007199254740993 rounds to ...992).
    expect(checkAmount("9007199254740993", "EUR", "9007199254740992")).toBe("AMOUNT_TOO_LARGE");
    expect(checkAmount("100.01", "EUR", "100")).toBe("AMOUNT_TOO_LARGE");
    expect(checkAmount("100.00", "EUR", "100")).toBeUndefined();
    expect(checkAmount("0.10", "EUR", "0.1")).toBeUndefined();
    expect(checkAmount("0.11", "EUR", "0.1")).toBe("AMOUNT_TOO_LARGE");
  });

  test("order: currency, then the grammar and decimals, then zero, then the maximum", () => {
    expect(checkAmount("abc", "XXX")).toBe("CURRENCY_INVALID");
    expect(checkAmount("19", "eur")).toBe("CURRENCY_INVALID");
    expect(checkAmount("2000000.001", "EUR")).toBe("AMOUNT_INVALID");
    expect(checkAmount("0.000", "EUR")).toBe("AMOUNT_INVALID");
  });

  test("a bad configured maximum is a fault, not an answer", () => {
    for (const max of ["0", "-1", "1e6", "", "01", "abc"]) expect(() => checkAmount("1", "EUR", max)).toThrow(RangeError);
  });
});

describe("compareDecimals", () => {
  test("agrees with BigInt arithmetic on random decimals", () => {
    const decimal = fc
      .tuple(fc.bigInt({ min: 0n, max: 10n ** 30n }), fc.integer({ min: 0, max: 6 }), fc.integer({ min: 0, max: 3 }))
      .map(([units, scale, pad]) => {
        const digits = units.toString().padStart(scale + 1, "0");
        const text = scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}${"0".repeat(pad)}`;
        return { text, units: units * 10n ** BigInt(12 - scale) };
      });
    fc.assert(
      fc.property(decimal, decimal, (a, b) => {
        expect(isPlainDecimal(a.text)).toBe(true);
        const expected = a.units < b.units ? -1 : a.units > b.units ? 1 : 0;
        return compareDecimals(a.text, b.text) === expected;
      }),
      { numRuns: 10_000 },
    );
  });
});
