import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ERRORS } from "../../src/core/errors.ts";
import { CROCKFORD_ALPHABET, isApprovalId, isSafeRef, mintApprovalId, mintDemoRef, normalizeApprovalIdInput } from "../../src/core/ids.ts";

const fixedBytes = (bytes: number[]) => (n: number) => Uint8Array.from(bytes.slice(0, n));

describe("approval ids", () => {
  test("the alphabet is Crockford base32: 32 characters, no I, L, O or U", () => {
    expect(CROCKFORD_ALPHABET).toBe("0123456789ABCDEFGHJKMNPQRSTVWXYZ");
    expect(new Set(CROCKFORD_ALPHABET).size).toBe(32);
    for (const c of "ILOU") expect(CROCKFORD_ALPHABET).not.toContain(c);
  });

  test("minted ids are valid, and differ", () => {
    const ids = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const id = mintApprovalId();
      expect(isApprovalId(id)).toBe(true);
      ids.add(id);
    }
    expect(ids.size).toBe(2000);
  });

  test("50 bits from 7 bytes map to ids one to one (all zeros, all ones, one bit)", () => {
    expect(mintApprovalId(fixedBytes([0, 0, 0, 0, 0, 0, 0]))).toBe("0000000000");
    expect(mintApprovalId(fixedBytes([255, 255, 255, 255, 255, 255, 255]))).toBe("ZZZZZZZZZZ");
    expect(mintApprovalId(fixedBytes([0, 0, 0, 0, 0, 0, 1]))).toBe("1000000000");
    // Bits above the 50 we use (the top 6 of the seventh byte) change nothing.
    expect(mintApprovalId(fixedBytes([0, 0, 0, 0, 0, 0, 0b11111100]))).toBe("0000000000");
  });

  test("an id is exactly the 50 random bits, so uniform bytes give uniform ids (no bias)", () => {
    // Decoding the id gives back the 48 bits of bytes 0-5 and the low 2 bits of byte 6: the map
    // from bits to ids is one to one, and no id is likelier than another.
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 7, maxLength: 7 }), (bytes) => {
        const id = mintApprovalId(() => bytes);
        let decoded = 0n;
        for (let i = 9; i >= 0; i--) decoded = decoded * 32n + BigInt(CROCKFORD_ALPHABET.indexOf(id[i]!));
        let bits = 0n;
        for (let i = 0; i < 6; i++) bits = bits * 256n + BigInt(bytes[i]!);
        bits = bits * 4n + BigInt(bytes[6]! & 3);
        return decoded === bits;
      }),
      { numRuns: 5000 },
    );
  });

  test("a short random source is refused", () => {
    expect(() => mintApprovalId(() => new Uint8Array(6))).toThrow(RangeError);
  });

  test("isApprovalId is exact: 10 uppercase alphabet characters and nothing else", () => {
    expect(isApprovalId("K7Q2M4XZ3A")).toBe(true);
    for (const bad of [
      "k7q2m4xz3a",
      "K7Q2M4XZ3",
      "K7Q2M4XZ3AB",
      " K7Q2M4XZ3A",
      "K7Q2M4XZ3A\n",
      "K7Q2M4XZ3I",
      "K7Q2M4XZ3L",
      "K7Q2M4XZ3O",
      "K7Q2M4XZ3U",
      "K7Q2M4XZ3-",
      "Ｋ7Q2M4XZ3A",
      "",
      1234567890,
      null,
      undefined,
      ["K7Q2M4XZ3A"],
    ]) {
      expect({ bad: String(bad), ok: isApprovalId(bad) }).toEqual({ bad: String(bad), ok: false });
    }
  });

  test("console input: trimmed, any case, canonical uppercase; look-alikes refused, not mapped", () => {
    expect(normalizeApprovalIdInput("k7q2m4xz3a")).toBe("K7Q2M4XZ3A");
    expect(normalizeApprovalIdInput("  K7q2M4xZ3a \n")).toBe("K7Q2M4XZ3A");
    expect(normalizeApprovalIdInput("K7Q2M4XZ3I")).toBeUndefined();
    expect(normalizeApprovalIdInput("k7q2m4xz3l")).toBeUndefined();
    expect(normalizeApprovalIdInput("K7Q2M4XZ3O")).toBeUndefined();
    expect(normalizeApprovalIdInput("K7Q2M4XZ3U")).toBeUndefined();
    expect(normalizeApprovalIdInput("K7Q2 M4XZ3A")).toBeUndefined();
    expect(normalizeApprovalIdInput("")).toBeUndefined();
    // Non-ASCII letters whose uppercase is ASCII: long s -> S, dotless i -> I, Kelvin sign.
    expect("ſ".toUpperCase()).toBe("S");
    expect(normalizeApprovalIdInput("K7Q2M4XZ3ſ")).toBeUndefined();
    expect(normalizeApprovalIdInput("\u212a7Q2M4XZ3A")).toBeUndefined();
    expect(normalizeApprovalIdInput("ｋ7q2m4xz3a")).toBeUndefined();
  });

  test("any minted id survives the console round trip in any case", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 7, maxLength: 7 }), fc.boolean(), (bytes, lower) => {
        const id = mintApprovalId(() => bytes);
        return normalizeApprovalIdInput(` ${lower ? id.toLowerCase() : id} `) === id;
      }),
      { numRuns: 2000 },
    );
  });
});

describe("refs", () => {
  test("demo refs: demo- and 8 lowercase hex, from the random source", () => {
    expect(mintDemoRef(fixedBytes([0xde, 0xad, 0x0b, 0x0f]))).toBe("demo-dead0b0f");
    for (let i = 0; i < 200; i++) {
      const ref = mintDemoRef();
      expect(ref).toMatch(/^demo-[0-9a-f]{8}$/);
      expect(isSafeRef(ref)).toBe(true);
    }
  });

  test("every error code in the table is safe to show the agent", () => {
    for (const code of Object.keys(ERRORS)) expect({ code, safe: isSafeRef(code) }).toEqual({ code, safe: true });
  });

  test("isSafeRef: 1-64 of A-Z a-z 0-9 _ -, and no card number", () => {
    for (const good of ["demo-0a1b2c3d", "CARD_NUMBER_REFUSED", "a", "x".repeat(64), "order_2024-113"]) expect(isSafeRef(good)).toBe(true);
    for (const bad of [
      "",
      "x".repeat(65),
      "a b",
      "a.b",
      "a/b",
      "é",
      "demo-0a1b2c3d\n",
      "ref:1",
      null,
      42,
      undefined,
      "4111111111111111",
      "ref-4111-1111-1111-1111",
      "pay_4111_1111_1111_1111",
      "x-378282246310005",
    ]) {
      expect({ bad: String(bad), ok: isSafeRef(bad) }).toEqual({ bad: String(bad), ok: false });
    }
  });
});
