// The desk's pure helpers: UTC periods and hours, key secrets and ids, constant-time compare,
// sealing, and argument problems that never carry the offending values.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { compileArgsSchema } from "../../src/core/desk/args.ts";
import { hourOf, nextHourMs, periodOf } from "../../src/core/desk/period.ts";
import { importSealingKey, seal, unseal } from "../../src/core/desk/seal.ts";
import { constantTimeEqual, lookupOf, newId, newKeySecret, sha256 } from "../../src/core/desk/secrets.ts";

describe("periods", () => {
  test("UTC days and months, whatever the local zone", () => {
    const t = Date.parse("2028-02-29T23:59:59.999Z");
    expect(periodOf("none", t)).toBe("none");
    expect(periodOf("daily", t)).toBe("2028-02-29");
    expect(periodOf("monthly", t)).toBe("2028-02");
    expect(periodOf("daily", t + 1)).toBe("2028-03-01");
    expect(periodOf("monthly", Date.parse("2026-12-31T23:59:59.999Z") + 1)).toBe("2027-01");
    expect(hourOf(Date.parse("2026-11-30T02:59:59.999Z"))).toBe("2026-11-30T02");
    expect(nextHourMs(Date.parse("2026-11-30T02:15:00Z"))).toBe(Date.parse("2026-11-30T03:00:00Z"));
  });

  test("periods sort in time order, so the ledger can refuse to move one backwards", () => {
    const instant = fc.integer({ min: Date.parse("2000-01-01T00:00:00Z"), max: Date.parse("2099-12-31T23:59:59Z") });
    fc.assert(
      fc.property(instant, instant, (a, b) => {
        for (const reset of ["daily", "monthly"] as const) {
          const [pa, pb] = [periodOf(reset, Math.min(a, b)), periodOf(reset, Math.max(a, b))];
          if (!(pa <= pb)) return false;
        }
        return true;
      }),
    );
  });
});

describe("secrets and ids", () => {
  test("a key secret is cd_live_ + 43 base64url characters; its lookup is a 12-character prefix", () => {
    const s = newKeySecret();
    expect(s.secret).toMatch(/^cd_live_[A-Za-z0-9_-]{43}$/);
    expect(s.lookup).toBe(s.secret.slice(8, 20));
    expect(Buffer.from(s.hash).toString("hex")).toBe(Buffer.from(sha256(s.secret)).toString("hex"));
    expect(lookupOf(s.secret)).toBe(s.lookup);
    for (const bad of ["", "cd_live_", `cd_test_${"A".repeat(43)}`, `cd_live_${"A".repeat(42)}`, `cd_live_${"A".repeat(42)}=`, `cd_live_${"A".repeat(44)}`]) {
      expect(lookupOf(bad)).toBeNull();
    }
    expect(newKeySecret().secret).not.toBe(s.secret);
  });

  test("ids are a prefix and 16 Crockford base32 characters", () => {
    expect(newId("key")).toMatch(/^key_[0-9abcdefghjkmnpqrstvwxyz]{16}$/);
    expect(newId("rcpt", () => new Uint8Array(10))).toBe("rcpt_0000000000000000");
  });

  test("constant-time equality", () => {
    expect(constantTimeEqual(sha256("a"), sha256("a"))).toBe(true);
    expect(constantTimeEqual(sha256("a"), sha256("b"))).toBe(false);
    expect(constantTimeEqual(new Uint8Array(3), new Uint8Array(4))).toBe(false);
  });

  test("a sealed value opens only with its key and its name", async () => {
    const key = await importSealingKey(new Uint8Array(32).fill(7));
    const other = await importSealingKey(new Uint8Array(32).fill(8));
    const blob = await seal(key, "paid", "secret-value");
    expect(blob).not.toContain("secret-value");
    expect(await seal(key, "paid", "secret-value")).not.toBe(blob); // a fresh IV each time
    expect(await unseal(key, "paid", blob)).toBe("secret-value");
    await expect(unseal(other, "paid", blob)).rejects.toThrow();
    await expect(unseal(key, "paid2", blob)).rejects.toThrow();
    const flipped = Buffer.from(blob, "base64url");
    flipped[20]! ^= 1;
    await expect(unseal(key, "paid", flipped.toString("base64url"))).rejects.toThrow();
    await expect(importSealingKey(new Uint8Array(16))).rejects.toThrow();
  });
});

describe("argument problems", () => {
  const check = compileArgsSchema({
    type: "object",
    properties: { q: { type: "string", maxLength: 5 }, n: { type: "integer", minimum: 1 }, tags: { type: "array", items: { enum: ["a", "b"] } } },
    required: ["q"],
    additionalProperties: false,
  });

  test("paths and rule names only, whatever the values hold", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 6 }), fc.string({ minLength: 1 }), (long, extraKey) => {
        const secretValue = `SECRET${long}`;
        const problems = check({ q: secretValue, n: 0, tags: ["z"], [`x${extraKey}`]: secretValue });
        const text = JSON.stringify(problems);
        return !text.includes("SECRET") && problems.every((p) => Object.keys(p).join() === "path,rule");
      }),
    );
    expect(check({ q: "toolong", n: 0, tags: ["a", "z"], more: 1 })).toEqual([
      { path: "/", rule: "additionalProperties" },
      { path: "/q", rule: "maxLength" },
      { path: "/n", rule: "minimum" },
      { path: "/tags/1", rule: "enum" },
    ]);
    expect(check({ q: "ok" })).toEqual([]);
  });

  test("a schema that does not compile is refused at registration", () => {
    expect(() => compileArgsSchema({ type: "object", properties: { a: { type: "no-such-type" } } })).toThrow();
    expect(() => compileArgsSchema("not a schema")).toThrow();
  });
});
