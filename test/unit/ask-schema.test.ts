import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import type { ErrorCode } from "../../src/core/errors.ts";
import { ERRORS } from "../../src/core/errors.ts";
import { holdsCardNumber, validateAccountAsk, validatePayAsk } from "../../src/core/schema/ask.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";

const PAY = { approval_id: "K7Q2M4XZ3A", ...PAY_FIELDS, reason: "renew the domain" } as const;
const ACCOUNT = {
  approval_id: "K7Q2M4XZ3A",
  provider_url: "https://provider.example/signup",
  identity_handle: "work",
  reason: "a test account",
} as const;

const payCode = (input: unknown, limits?: { maxAmount?: string }) => {
  const r = validatePayAsk(input, limits);
  return r.ok ? "ok" : r.code;
};
const accountCode = (input: unknown) => {
  const r = validateAccountAsk(input);
  return r.ok ? "ok" : r.code;
};

const CARD = "4111111111111111";
const DISGUISES: Record<string, string> = {
  plain: CARD,
  spaces: "4111 1111 1111 1111",
  dots: "4111.1111.1111.1111",
  dashes: "4111-1111-1111-1111",
  "inside a longer number": `77${CARD}0042`,
  "full-width": "４１１１１１１１１１１１１１１１",
  "Arabic-Indic": "٤١١١١١١١١١١١١١١١",
  "URL path": `https://shop.example/checkout/${CARD}`,
  "URL query": "https://shop.example/pay?n=4111-1111-1111-1111",
  "percent-encoded": "https://shop.example/4111%201111%201111%201111",
  "handle-looking": `card-${CARD}`,
  "Amex in text": "use 3782 822463 10005 please",
};

describe("valid asks", () => {
  test("a pay ask comes back with kind, NFC text and the parsed href", () => {
    const r = validatePayAsk({ ...PAY, merchant: "Cafe\u0301 Ex\u0430mple", checkout_url: "https://shop.exаmple/straße", reason: "e\u0301" });
    expect(r).toEqual({
      ok: true,
      ask: {
        kind: "pay",
        approval_id: "K7Q2M4XZ3A",
        merchant: "Café Exаmple",
        amount: "19.00",
        currency: "EUR",
        card_handle: "card-2",
        checkout_url: "https://shop.xn--exmple-4nf/stra%C3%9Fe",
        reason: "é",
      },
    });
    if (r.ok) expect(r.ask.merchant).toBe("Caf\u00e9 Ex\u0430mple");
  });

  test("reason is optional and absent from the ask when absent", () => {
    const { reason: _, ...noReason } = PAY;
    const r = validatePayAsk(noReason);
    expect(r.ok && Object.hasOwn(r.ask, "reason")).toBe(false);
    expect(r.ok).toBe(true);
  });

  test("an account ask, with and without its optional fields", () => {
    expect(validateAccountAsk(ACCOUNT)).toEqual({ ok: true, ask: { kind: "account", ...ACCOUNT } });
    expect(validateAccountAsk({ approval_id: "K7Q2M4XZ3A", provider_url: "https://provider.example" })).toEqual({
      ok: true,
      ask: { kind: "account", approval_id: "K7Q2M4XZ3A", provider_url: "https://provider.example/" },
    });
  });

  test("amounts follow the currency and the configured maximum", () => {
    expect(payCode({ ...PAY, amount: "19", currency: "JPY" })).toBe("ok");
    expect(payCode({ ...PAY, amount: "19.0", currency: "JPY" })).toBe("AMOUNT_INVALID");
    expect(payCode({ ...PAY, amount: "1.234", currency: "KWD" })).toBe("ok");
    expect(payCode({ ...PAY, amount: "1000000.01" })).toBe("AMOUNT_TOO_LARGE");
    expect(payCode({ ...PAY, amount: "50.01" }, { maxAmount: "50" })).toBe("AMOUNT_TOO_LARGE");
    expect(payCode({ ...PAY, amount: "50.00" }, { maxAmount: "50" })).toBe("ok");
    // A bad configured maximum is a fault of the operator, not an answer to the agent.
    expect(() => validatePayAsk(PAY, { maxAmount: "1e6" })).toThrow(RangeError);
  });
});

describe("shape", () => {
  test("not a plain object: BODY_INVALID", () => {
    for (const input of [null, undefined, "x", 1, true, [], [PAY], new Map(Object.entries(PAY)), new Date()]) {
      expect(payCode(input)).toBe("BODY_INVALID");
      expect(accountCode(input)).toBe("BODY_INVALID");
    }
    expect(payCode(Object.assign(Object.create(null), PAY))).toBe("ok");
  });

  test("an unknown field: FIELD_UNKNOWN, also before a missing one", () => {
    expect(payCode({ ...PAY, extra: 1 })).toBe("FIELD_UNKNOWN");
    expect(payCode({ ...PAY, kind: "pay" })).toBe("FIELD_UNKNOWN");
    expect(payCode({ ...PAY, identity_handle: "work" })).toBe("FIELD_UNKNOWN");
    expect(payCode(JSON.parse(`{"__proto__": {"x": 1}, ${JSON.stringify(PAY).slice(1)}`))).toBe("FIELD_UNKNOWN");
    expect(payCode({ ...PAY, constructor: "x" })).toBe("FIELD_UNKNOWN");
    expect(payCode({ extra: 1 })).toBe("FIELD_UNKNOWN");
    expect(accountCode({ ...ACCOUNT, card_handle: "card-2" })).toBe("FIELD_UNKNOWN");
  });

  test("each required field missing: FIELD_MISSING", () => {
    for (const key of ["approval_id", "merchant", "amount", "currency", "card_handle", "checkout_url"]) {
      const input: Record<string, unknown> = { ...PAY };
      delete input[key];
      expect({ key, code: payCode(input) }).toEqual({ key, code: "FIELD_MISSING" });
    }
    for (const key of ["approval_id", "provider_url"]) {
      const input: Record<string, unknown> = { ...ACCOUNT };
      delete input[key];
      expect({ key, code: accountCode(input) }).toEqual({ key, code: "FIELD_MISSING" });
    }
  });
});

describe("one code per field rule", () => {
  const cases: [string, unknown, ErrorCode][] = [
    ["approval_id", "k7q2m4xz3a", "APPROVAL_ID_INVALID"],
    ["approval_id", "K7Q2M4XZ3I", "APPROVAL_ID_INVALID"],
    ["approval_id", "K7Q2M4XZ3", "APPROVAL_ID_INVALID"],
    ["approval_id", 1, "APPROVAL_ID_INVALID"],
    ["merchant", "", "MERCHANT_INVALID"],
    ["merchant", "   ", "MERCHANT_INVALID"],
    ["merchant", "\u3000\u00a0", "MERCHANT_INVALID"],
    ["merchant", "\u200b\u200b", "MERCHANT_INVALID"],
    ["merchant", "\u0301", "MERCHANT_INVALID"],
    ["merchant", "Shop\nApproved", "MERCHANT_INVALID"],
    ["merchant", "Shop\u001b[2J", "MERCHANT_INVALID"],
    ["merchant", "Shop\u0085", "MERCHANT_INVALID"],
    ["merchant", "Shop\ud800", "MERCHANT_INVALID"],
    ["merchant", "x".repeat(81), "MERCHANT_INVALID"],
    ["merchant", null, "MERCHANT_INVALID"],
    ["amount", "0", "AMOUNT_INVALID"],
    ["amount", "-5", "AMOUNT_INVALID"],
    ["amount", "1e3", "AMOUNT_INVALID"],
    ["amount", "01.00", "AMOUNT_INVALID"],
    ["amount", "19.001", "AMOUNT_INVALID"],
    ["amount", 19, "AMOUNT_INVALID"],
    ["amount", "2000000", "AMOUNT_TOO_LARGE"],
    ["currency", "eur", "CURRENCY_INVALID"],
    ["currency", "XXX", "CURRENCY_INVALID"],
    ["currency", "HRK", "CURRENCY_INVALID"],
    ["currency", "EURO", "CURRENCY_INVALID"],
    ["currency", 978, "CURRENCY_INVALID"],
    ["card_handle", "Card-2", "CARD_HANDLE_INVALID"],
    ["card_handle", "2card", "CARD_HANDLE_INVALID"],
    ["card_handle", "card_2", "CARD_HANDLE_INVALID"],
    ["card_handle", "", "CARD_HANDLE_INVALID"],
    ["card_handle", `c${"a".repeat(32)}`, "CARD_HANDLE_INVALID"],
    ["card_handle", "card-2\n", "CARD_HANDLE_INVALID"],
    ["checkout_url", "http://shop.example/", "URL_INVALID"],
    ["checkout_url", "https://u:p@shop.example/", "URL_INVALID"],
    ["checkout_url", "/checkout", "URL_INVALID"],
    ["checkout_url", `https://shop.example/${"a".repeat(2028)}`, "URL_INVALID"],
    ["reason", "x".repeat(501), "REASON_INVALID"],
    ["reason", null, "REASON_INVALID"],
    ["reason", ["a"], "REASON_INVALID"],
    ["reason", "\udc00", "REASON_INVALID"],
  ];
  for (const [field, value, code] of cases) {
    test(`${field} = ${JSON.stringify(value).slice(0, 30)}: ${code}`, () => {
      expect(payCode({ ...PAY, [field]: value })).toBe(code);
    });
  }

  test("account fields", () => {
    expect(accountCode({ ...ACCOUNT, identity_handle: "Work" })).toBe("IDENTITY_HANDLE_INVALID");
    expect(accountCode({ ...ACCOUNT, identity_handle: "" })).toBe("IDENTITY_HANDLE_INVALID");
    expect(accountCode({ ...ACCOUNT, identity_handle: null })).toBe("IDENTITY_HANDLE_INVALID");
    expect(accountCode({ ...ACCOUNT, provider_url: "http://provider.example/" })).toBe("URL_INVALID");
    expect(accountCode({ ...ACCOUNT, approval_id: "nope" })).toBe("APPROVAL_ID_INVALID");
    expect(accountCode({ ...ACCOUNT, reason: "x".repeat(501) })).toBe("REASON_INVALID");
  });

  test("every code used here is in the error table", () => {
    for (const [, , code] of cases) expect(Object.hasOwn(ERRORS, code)).toBe(true);
  });

  test("limits are counted in characters after NFC", () => {
    expect(payCode({ ...PAY, merchant: "x".repeat(80) })).toBe("ok");
    expect(payCode({ ...PAY, merchant: "😀".repeat(80) })).toBe("ok");
    expect(payCode({ ...PAY, merchant: "😀".repeat(81) })).toBe("MERCHANT_INVALID");
    // 80 decomposed é (160 code points) compose to 80.
    expect(payCode({ ...PAY, merchant: "e\u0301".repeat(80) })).toBe("ok");
    expect(payCode({ ...PAY, merchant: "e\u0301".repeat(81) })).toBe("MERCHANT_INVALID");
    expect(payCode({ ...PAY, merchant: "\u0915\u093c".repeat(41) })).toBe("MERCHANT_INVALID"); // U+0958 is a composition exclusion: NFC keeps two
    expect(payCode({ ...PAY, reason: "x".repeat(500) })).toBe("ok");
    expect(payCode({ ...PAY, reason: "e\u0301".repeat(500) })).toBe("ok");
    expect(payCode({ ...PAY, reason: "😀".repeat(501) })).toBe("REASON_INVALID");
    expect(payCode({ ...PAY, card_handle: `c${"a".repeat(31)}` })).toBe("ok");
  });

  test("merchant keeps printable text, joiners included; reason keeps newlines (the recap escapes both)", () => {
    expect(payCode({ ...PAY, merchant: "می\u200cخواهم" })).toBe("ok");
    expect(payCode({ ...PAY, merchant: "Shop \u202eevil" })).toBe("ok");
    expect(payCode({ ...PAY, reason: "line one\nline two\t[ask K7Q2M4XZ3A] PAY" })).toBe("ok");
    expect(payCode({ ...PAY, reason: "" })).toBe("ok");
  });
});

describe("order of checks", () => {
  test("pay: approval_id, merchant, currency, amount, card_handle, checkout_url, reason", () => {
    const bad = {
      approval_id: "bad",
      merchant: "",
      currency: "eur",
      amount: "0",
      card_handle: "Bad",
      checkout_url: "http://x.example/",
      reason: "x".repeat(501),
    };
    const expected = [
      "APPROVAL_ID_INVALID",
      "MERCHANT_INVALID",
      "CURRENCY_INVALID",
      "AMOUNT_INVALID",
      "CARD_HANDLE_INVALID",
      "URL_INVALID",
      "REASON_INVALID",
      "ok",
    ];
    const input: Record<string, unknown> = { ...bad };
    const seen: string[] = [];
    for (const key of [...Object.keys(bad), "done"]) {
      seen.push(payCode(input));
      if (key !== "done") input[key] = PAY[key as keyof typeof PAY];
    }
    expect(seen).toEqual(expected);
  });

  test("account: approval_id, provider_url, identity_handle, reason", () => {
    const input: Record<string, unknown> = { approval_id: "bad", provider_url: "ftp://x/", identity_handle: "X", reason: 5 };
    const seen: string[] = [];
    for (const key of ["approval_id", "provider_url", "identity_handle", "reason", "done"]) {
      seen.push(accountCode(input));
      if (key !== "done") input[key] = ACCOUNT[key as keyof typeof ACCOUNT];
    }
    expect(seen).toEqual(["APPROVAL_ID_INVALID", "URL_INVALID", "IDENTITY_HANDLE_INVALID", "REASON_INVALID", "ok"]);
  });
});

describe("the card-number net", () => {
  const payFields = ["approval_id", "merchant", "amount", "currency", "card_handle", "checkout_url", "reason"];
  const accountFields = ["approval_id", "provider_url", "identity_handle", "reason"];

  for (const [name, value] of Object.entries(DISGUISES)) {
    test(`${name}: refused in every field, unknown fields and keys included`, () => {
      for (const field of [...payFields, "unknown_field"]) {
        const r = validatePayAsk({ ...PAY, [field]: value });
        expect({ field, r }).toEqual({ field, r: { ok: false, code: "CARD_NUMBER_REFUSED" } });
        // Only the code comes back: the value is not echoed.
        expect(JSON.stringify(r)).not.toMatch(/[0-9]{4}/);
      }
      for (const field of [...accountFields, "unknown_field"]) {
        expect({ field, code: accountCode({ ...ACCOUNT, [field]: value }) }).toEqual({ field, code: "CARD_NUMBER_REFUSED" });
      }
      expect(payCode({ ...PAY, nested: { deeper: [1, { x: value }] } })).toBe("CARD_NUMBER_REFUSED");
      expect(payCode({ ...PAY, [value]: 1 })).toBe("CARD_NUMBER_REFUSED");
    });
  }

  test("the net wins over every other code", () => {
    expect(payCode({ extra: CARD })).toBe("CARD_NUMBER_REFUSED");
    expect(payCode({ merchant: "", reason: "4111 1111 1111 1111" })).toBe("CARD_NUMBER_REFUSED");
    expect(payCode({ ...PAY, approval_id: "bad", reason: CARD })).toBe("CARD_NUMBER_REFUSED");
    expect(accountCode({ provider_url: `http://x.example/${CARD}` })).toBe("CARD_NUMBER_REFUSED");
    // Not an object at all is still BODY_INVALID: there are no fields to look into.
    expect(payCode([CARD])).toBe("BODY_INVALID");
  });

  test("a number the URL parser would decode out of a host is refused", () => {
    const host = [...CARD].map((c) => `%3${c}`).join("");
    expect(payCode({ ...PAY, checkout_url: `https://${host}.example/` })).toBe("CARD_NUMBER_REFUSED");
  });

  test("near misses pass: failing Luhn, 12 digits, letters between groups", () => {
    expect(payCode({ ...PAY, reason: "ref 4111111111111113" })).toBe("ok");
    expect(payCode({ ...PAY, reason: "order 411111111116" })).toBe("ok");
    expect(payCode({ ...PAY, checkout_url: "https://shop.example/o/4111-1111/x/1111-1111" })).toBe("ok");
    expect(payCode({ ...PAY, merchant: "Shop 1111111111111111111111111" })).toBe("ok");
  });

  test("any Luhn-valid number in any one field of a pay ask is refused (property)", () => {
    const luhnNumber = fc.tuple(fc.integer({ min: 13, max: 19 }), fc.stringMatching(/^[0-9]{18}$/)).map(([len, body]) => {
      const head = body.slice(0, len - 1);
      for (let c = 0; c <= 9; c++) {
        const n = head + c;
        let sum = 0;
        for (let k = 0; k < n.length; k++) {
          let d = Number(n[n.length - 1 - k]) * (k % 2 ? 2 : 1);
          if (d > 9) d -= 9;
          sum += d;
        }
        if (sum % 10 === 0) return n;
      }
      throw new Error("unreachable");
    });
    fc.assert(
      fc.property(fc.constantFrom(...payFields), luhnNumber, fc.constantFrom(" ", "-", ".", ""), (field, n, sep) => {
        const value = `x ${n.replace(/(\d{4})(?=\d)/g, `$1${sep}`)} y`;
        return payCode({ ...PAY, [field]: value }) === "CARD_NUMBER_REFUSED";
      }),
      { numRuns: 2000 },
    );
  });

  test("holdsCardNumber walks nested values and keys, and survives cycles", () => {
    const cyclic: Record<string, unknown> = { a: "x" };
    cyclic.self = cyclic;
    expect(holdsCardNumber(cyclic)).toBe(false);
    cyclic.b = [CARD];
    expect(holdsCardNumber(cyclic)).toBe(true);
    expect(holdsCardNumber({ [CARD]: null })).toBe(true);
    expect(holdsCardNumber(42)).toBe(false);
  });
});

describe("each field on its own", () => {
  test("a card number in any one field is refused as such", () => {
    for (const [field, value] of [
      ["approval_id", CARD],
      ["merchant", `Shop ${CARD}`],
      ["currency", CARD],
      ["amount", CARD],
      ["card_handle", `card-${CARD}`],
      ["checkout_url", `https://shop.example/${CARD}`],
      ["reason", CARD],
    ]) {
      expect([field, payCode({ ...PAY, [field!]: value })]).toEqual([field, "CARD_NUMBER_REFUSED"]);
    }
    expect(accountCode({ ...ACCOUNT, identity_handle: `id-${CARD}` })).toBe("CARD_NUMBER_REFUSED");
  });

  test("values come back NFC, URLs as their href; each rule answers its own code", () => {
    const pay = (over: Record<string, unknown>) => {
      const r = validatePayAsk({ ...PAY, ...over });
      return r.ok ? r.ask : r.code;
    };
    expect(pay({ merchant: "Cafe\u0301" })).toMatchObject({ merchant: "Café" });
    expect(pay({ merchant: "" })).toBe("MERCHANT_INVALID");
    expect(pay({ currency: "JPY", amount: "19" })).toMatchObject({ currency: "JPY", amount: "19" });
    expect(pay({ currency: "jpy" })).toBe("CURRENCY_INVALID");
    expect(pay({ currency: "JPY", amount: "19.5" })).toBe("AMOUNT_INVALID");
    expect(payCode({ ...PAY, amount: "20" }, { maxAmount: "10" })).toBe("AMOUNT_TOO_LARGE");
    expect(pay({ card_handle: "card-2" })).toMatchObject({ card_handle: "card-2" });
    expect(accountCode({ ...ACCOUNT, identity_handle: "Work" })).toBe("IDENTITY_HANDLE_INVALID");
    expect(pay({ checkout_url: "https://Shop.example" })).toMatchObject({ checkout_url: "https://shop.example/" });
    expect(pay({ checkout_url: "http://shop.example" })).toBe("URL_INVALID");
    expect(pay({ reason: "e\u0301" })).toMatchObject({ reason: "é" });
  });
});
