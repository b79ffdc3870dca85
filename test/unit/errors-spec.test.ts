// The error table and SPEC.md tell one story: every code is documented, and every status table
// in SPEC.md gives a code its own HTTP status (a client reads the status before the body).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ERRORS, isErrorCode } from "../../src/core/errors.ts";
import { isSafeRef } from "../../src/core/ids.ts";

const spec = readFileSync(join(import.meta.dir, "../../SPEC.md"), "utf8");

test("every error code is named in SPEC.md", () => {
  const missing = Object.keys(ERRORS).filter((code) => !spec.includes(`\`${code}\``));
  expect(missing).toEqual([]);
});

test("each `| status | CODE |` row of SPEC.md is the code's own status", () => {
  const rows = [...spec.matchAll(/^\| (\d{3}) \| `([A-Z_]+)` \|/gm)].map((m) => [m[2]!, Number(m[1])] as const);
  expect(rows.length).toBeGreaterThanOrEqual(9);
  for (const [code, status] of rows) {
    expect(isErrorCode(code)).toBe(true);
    expect([code, status]).toEqual([code, isErrorCode(code) ? ERRORS[code].http : -1]);
  }
});

test("every code is of the form an agent may see: ^[A-Za-z0-9_-]{1,64}$, no card number", () => {
  expect(Object.keys(ERRORS).filter((code) => !isSafeRef(code) || !/^[A-Z][A-Z0-9_]*$/.test(code))).toEqual([]);
});
