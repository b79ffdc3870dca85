// The PostgreSQL adapter's place in the tree, read from the import lines: only
// src/adapters/postgres/ touches Bun's SQL client, and it reaches only core, its own folder, Bun
// and the few node modules it needs (never SQLite, another adapter, a command or the CLI).
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const SRC = join(import.meta.dir, "../../src");

const files = readdirSync(SRC, { withFileTypes: true, recursive: true })
  .filter((e) => e.isFile() && e.name.endsWith(".ts"))
  .map((e) => {
    const path = relative(SRC, join(e.parentPath, e.name));
    return { path, text: readFileSync(join(SRC, path), "utf8") };
  });

const importsOf = (text: string) =>
  [...text.matchAll(/(?:^|\n)\s*((?:import|export)\b[^;]*?)from\s*["']([^"']+)["']/g)].map((m) => ({ names: m[1]!, spec: m[2]! }));
const target = (from: string, spec: string) => (spec.startsWith(".") ? relative(SRC, join(SRC, from, "..", spec)) : spec);

describe("PostgreSQL boundaries", () => {
  const adapter = files.filter((f) => f.path.startsWith("adapters/postgres/"));

  test("the scan sees the adapter", () => {
    expect(adapter.map((f) => f.path)).toContain("adapters/postgres/money.ts");
    expect(adapter.length).toBeGreaterThanOrEqual(8);
  });

  test("only adapters/postgres uses Bun's SQL client", () => {
    for (const f of files.filter((f) => !f.path.startsWith("adapters/postgres/"))) {
      const usesSql = importsOf(f.text).some((i) => i.spec === "bun" && /\bSQL\b|\bsql\b/.test(i.names)) || /\bBun\.(SQL|sql)\b/.test(f.text);
      expect(`${f.path}: ${usesSql}`).toBe(`${f.path}: false`);
    }
  });

  test("adapters/postgres imports core, its own folder, bun, node:fs and node:net only, and SQLite's ledger for its types alone", () => {
    for (const f of adapter) {
      for (const { names, spec } of importsOf(f.text)) {
        const to = target(f.path, spec);
        expect(`${f.path} -> ${to}`).toMatch(/ -> (core\/|adapters\/postgres\/|bun$|node:fs$|node:net$)/);
        // core/ledger opens SQLite when loaded: its types may be shared, its code is not.
        if (to.startsWith("core/ledger/")) expect(`${f.path} -> ${to}: ${names.trim().split(/\s+/).slice(0, 2).join(" ")}`).toBe(`${f.path} -> ${to}: import type`);
      }
      expect(`${f.path}: ${/process\.env|process\.exit|console\./.test(f.text)}`).toBe(`${f.path}: false`);
    }
  });
});
