// The receipt vectors (test/vectors/receipts/) against the library: the same lines the binary
// prints (test/e2e/verify-receipt.test.ts runs them through dist/ask-only).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { describeCheck, verifyResponse } from "../../src/core/receipt/index.ts";
import { parseVector, readVectors, VECTOR_JWKS } from "../vectors/receipts/vectors.ts";

const jwks = JSON.parse(readFileSync(VECTOR_JWKS, "utf8"));
const vectors = readVectors();

describe("receipt vectors through the library", () => {
  test("the set covers passing and tampered cases", () => {
    expect(vectors.length).toBeGreaterThanOrEqual(15);
    expect(vectors.filter((v) => v.exit === 0).length).toBeGreaterThanOrEqual(5);
    expect(vectors.filter((v) => v.exit === 1).length).toBeGreaterThanOrEqual(5);
  });

  for (const v of vectors) {
    test(`${v.name}: ${v.description}`, () => {
      const checks = verifyResponse(JSON.parse(v.body), jwks, v.args === undefined ? undefined : JSON.parse(v.args));
      expect(checks.map(describeCheck)).toEqual(v.stdout);
      expect(checks.every((c) => c.ok) ? 0 : 1).toBe(v.exit);
    });
  }

  test("the vector grammar is strict", () => {
    const ok = "description: d\nexit: 0\nstdout: ok   signature\n\n{}\n";
    expect(parseVector("x", ok).body).toBe("{}\n");
    expect(() => parseVector("x", ok.replace("exit: 0", "expect: 0"))).toThrow("unknown header expect");
    expect(() => parseVector("x", ok.replace("exit: 0", "exit: 0\nexit: 1"))).toThrow("header exit given twice");
    expect(() => parseVector("x", ok.replace("exit: 0", "exit:0"))).toThrow("malformed header");
    expect(() => parseVector("x", ok.replace("\n\n", "\n"))).toThrow("no blank line");
    expect(() => parseVector("x", ok.replace("stdout: ok   signature\n", ""))).toThrow("no stdout lines");
  });
});
