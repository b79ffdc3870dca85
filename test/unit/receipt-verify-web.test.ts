// The console's WebCrypto verifier against the receipt vectors: the very lines the library (and
// the binary) print, so the browser can never pass what verify-receipt fails, or the reverse.
// Also: the module stays browser-safe (no runtime import reaches node: or bun).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describeCheck } from "../../src/core/receipt/index.ts";
import { decodeBase64urlWeb, importJwksWeb, verifyResponseWeb } from "../../src/core/receipt/verify-web.ts";
import { readVectors, VECTOR_JWKS } from "../vectors/receipts/vectors.ts";

const jwks = JSON.parse(readFileSync(VECTOR_JWKS, "utf8"));
const vectors = readVectors();

describe("receipt vectors through the WebCrypto verifier", () => {
  for (const v of vectors) {
    test(`${v.name}: ${v.description}`, async () => {
      const keys = await importJwksWeb(jwks);
      const checks = await verifyResponseWeb(JSON.parse(v.body), keys, v.args === undefined ? undefined : JSON.parse(v.args));
      expect(checks.map(describeCheck)).toEqual(v.stdout);
      expect(checks.every((c) => c.ok) ? 0 : 1).toBe(v.exit);
    });
  }

  test("a key set with a private part or a kid that is not the thumbprint is refused", async () => {
    const key = jwks.keys[0];
    await expect(importJwksWeb({ keys: [{ ...key, d: key.x }] })).rejects.toThrow('holds private key material ("d")');
    await expect(importJwksWeb({ keys: [{ ...key, kid: "someone-else" }] })).rejects.toThrow("not its RFC 7638 thumbprint");
  });

  test("base64url has one spelling only", () => {
    expect(decodeBase64urlWeb("AQI")).toEqual(new Uint8Array([1, 2]));
    expect(decodeBase64urlWeb("AQJ")).toBeNull(); // non-zero spare bits
    expect(decodeBase64urlWeb("AQI=")).toBeNull();
    expect(decodeBase64urlWeb("AQ+I")).toBeNull();
  });

  test("the verifier and everything it imports are browser-safe: no node:, bun or package imports", () => {
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const text = readFileSync(file, "utf8");
      for (const m of text.matchAll(/^import (?!type)[^;]*from "([^"]+)"/gm)) {
        const spec = m[1]!;
        expect(`${file}: ${spec}`).toMatch(/: \.\.?\/[^:]*\.ts$/);
        visit(join(dirname(file), spec));
      }
    };
    visit(join(import.meta.dir, "../../src/core/receipt/verify-web.ts"));
    // The walk reached the shared rules, so it really followed the imports.
    expect([...seen].map((f) => f.split("/src/")[1])).toEqual(
      expect.arrayContaining(["core/receipt/checks.ts", "core/receipt/shapes.ts", "core/receipt/printable.ts", "core/recap/sanitize.ts"]),
    );
  });
});
