// The desk's spend ask as the approver reads it: strict, one code per field rule in a fixed
// order, the card-number net first (but over a well-formed hash), and a whole preview that must
// be the arguments themselves.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ERRORS, type ErrorCode } from "../../src/core/errors.ts";
import { canonicalJson } from "../../src/core/receipt/canonical.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";
import { PREVIEW_MAX, validateSpendAsk } from "../../src/core/schema/spend-ask.ts";

const ARGS = { message: "hello, paid world", n: 3 };
const PREVIEW = canonicalJson(ARGS);
const SPEND_BODY = {
  approval_id: "K7Q2M4XZ3A",
  reservation_id: "res_42",
  tool: "everything__echo",
  price_mc: 1500,
  key_id: "key_7h2k9d0q3x5m1n4p",
  key_name: "research-agent",
  org_id: "org_a1b2c3d4e5f6g7h8",
  org_name: "acme",
  params_sha256: sha256Hex(PREVIEW),
  preview: PREVIEW,
  preview_cut: false,
};

const code = (over: Record<string, unknown>) => {
  const r = validateSpendAsk({ ...SPEND_BODY, ...over });
  return r.ok ? "ok" : r.code;
};

describe("a valid spend ask", () => {
  test("comes back exactly as sent, with its kind", () => {
    expect(validateSpendAsk(SPEND_BODY)).toEqual({ ok: true, ask: { kind: "spend", ...SPEND_BODY } });
  });

  test("nothing is rewritten: text that is not NFC stays as the desk hashed it", () => {
    const preview = canonicalJson({ q: "Cafe\u0301" });
    const r = validateSpendAsk({ ...SPEND_BODY, org_name: "Cafe\u0301", preview, params_sha256: sha256Hex(preview) });
    expect(r.ok && r.ask.org_name).toBe("Cafe\u0301");
    expect(r.ok && r.ask.preview).toBe(preview);
  });

  test("a cut preview need not hash to params_sha256; an empty key name is allowed (the desk's default)", () => {
    expect(code({ preview: '{"message":"hel', preview_cut: true })).toBe("ok");
    expect(code({ key_name: "" })).toBe("ok");
    expect(code({ preview: "x".repeat(PREVIEW_MAX), preview_cut: true })).toBe("ok");
    expect(code({ price_mc: 10_000_000_000 })).toBe("ok");
  });
});

describe("shape and net", () => {
  test("not an object, an unknown field, a missing field", () => {
    for (const input of [null, [], "x", 5]) expect(validateSpendAsk(input)).toEqual({ ok: false, code: "BODY_INVALID" });
    expect(code({ reason: "please" })).toBe("FIELD_UNKNOWN");
    expect(code({ kind: "spend" })).toBe("FIELD_UNKNOWN");
    for (const key of Object.keys(SPEND_BODY)) {
      const input: Record<string, unknown> = { ...SPEND_BODY };
      delete input[key];
      expect({ key, code: validateSpendAsk(input) }).toEqual({ key, code: { ok: false, code: "FIELD_MISSING" } });
    }
  });

  test("a card number in any name, id or the preview is refused as such, before anything else", () => {
    for (const key of ["key_name", "org_name", "preview", "tool", "reservation_id", "key_id", "org_id"]) {
      expect({ key, code: code({ [key]: "4111 1111 1111 1111", extra: 1 }) }).toEqual({ key, code: "CARD_NUMBER_REFUSED" });
    }
    const preview = canonicalJson({ card: "4111-1111-1111-1111" });
    expect(code({ preview, params_sha256: sha256Hex(preview) })).toBe("CARD_NUMBER_REFUSED");
    expect(code({ "4111111111111111": 1 })).toBe("CARD_NUMBER_REFUSED");
  });

  test("a well-formed hash is not read by the net (one in a hundred holds a Luhn-valid run); any other params_sha256 is", () => {
    const hash = `4111111111111111${"a".repeat(48)}`;
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(code({ params_sha256: hash, preview_cut: true })).toBe("ok");
    expect(code({ params_sha256: `${hash}0`, preview_cut: true })).toBe("CARD_NUMBER_REFUSED");
    expect(code({ params_sha256: hash.toUpperCase(), preview_cut: true })).toBe("CARD_NUMBER_REFUSED");
  });
});

describe("one code per field rule, in the fixed order", () => {
  const cases: [string, unknown, ErrorCode][] = [
    ["approval_id", "k7q2m4xz3a", "APPROVAL_ID_INVALID"],
    ["reservation_id", "", "RESERVATION_ID_INVALID"],
    ["reservation_id", "res 42", "RESERVATION_ID_INVALID"],
    ["reservation_id", "r".repeat(65), "RESERVATION_ID_INVALID"],
    ["tool", "echo", "TOOL_INVALID"],
    ["tool", "Everything__echo", "TOOL_INVALID"],
    ["tool", "everything__", "TOOL_INVALID"],
    ["tool", "everything__ech o", "TOOL_INVALID"],
    ["tool", `u__${"t".repeat(129)}`, "TOOL_INVALID"],
    ["price_mc", 0, "PRICE_INVALID"],
    ["price_mc", -1, "PRICE_INVALID"],
    ["price_mc", 1.5, "PRICE_INVALID"],
    ["price_mc", "1500", "PRICE_INVALID"],
    ["price_mc", 10_000_000_001, "PRICE_INVALID"],
    ["price_mc", Number.POSITIVE_INFINITY, "PRICE_INVALID"],
    ["key_id", "key 1", "KEY_ID_INVALID"],
    ["key_id", 7, "KEY_ID_INVALID"],
    ["key_name", "x".repeat(201), "KEY_NAME_INVALID"],
    ["key_name", "a\ud800", "KEY_NAME_INVALID"],
    ["key_name", null, "KEY_NAME_INVALID"],
    ["org_id", "", "ORG_ID_INVALID"],
    ["org_name", "", "ORG_NAME_INVALID"],
    ["org_name", "\udfff", "ORG_NAME_INVALID"],
    ["params_sha256", "abc", "PARAMS_SHA256_INVALID"],
    ["params_sha256", "A".repeat(64), "PARAMS_SHA256_INVALID"],
    ["preview_cut", "no", "PREVIEW_INVALID"],
    ["preview", "", "PREVIEW_INVALID"],
    ["preview", 5, "PREVIEW_INVALID"],
    ["preview", `${PREVIEW} `, "PREVIEW_INVALID"],
    ["preview", "{}", "PREVIEW_INVALID"],
    ["preview", "\ud800", "PREVIEW_INVALID"],
  ];
  for (const [field, value, expected] of cases) {
    test(`${field} = ${JSON.stringify(value)}: ${expected}`, () => {
      expect(code({ [field]: value })).toBe(expected);
      expect(ERRORS[expected].http).toBe(400);
    });
  }

  test("a preview of more than 500 characters, cut or not, is refused", () => {
    expect(code({ preview: "x".repeat(PREVIEW_MAX + 1), preview_cut: true })).toBe("PREVIEW_INVALID");
    expect(code({ preview: "\u{1f600}".repeat(PREVIEW_MAX), preview_cut: true })).toBe("ok");
  });

  test("the first broken field in the order is the answer", () => {
    expect(code({ approval_id: "x", tool: "x", price_mc: 0 })).toBe("APPROVAL_ID_INVALID");
    expect(code({ tool: "x", price_mc: 0 })).toBe("TOOL_INVALID");
    expect(code({ price_mc: 0, key_id: "" })).toBe("PRICE_INVALID");
    expect(code({ key_name: 1, org_id: "" })).toBe("KEY_NAME_INVALID");
    expect(code({ params_sha256: "x", preview: "" })).toBe("PARAMS_SHA256_INVALID");
  });

  test("property: a whole preview passes exactly when it hashes to params_sha256", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.boolean(), (args, tamper) => {
        let preview: string;
        try {
          preview = canonicalJson({ args });
        } catch {
          return;
        }
        if (preview.length > PREVIEW_MAX) return;
        const params = sha256Hex(tamper ? `${preview} ` : preview);
        const r = validateSpendAsk({ ...SPEND_BODY, preview, params_sha256: params });
        if (r.ok || r.code !== "CARD_NUMBER_REFUSED") expect(r.ok).toBe(!tamper);
      }),
      { numRuns: 500 },
    );
  });
});
