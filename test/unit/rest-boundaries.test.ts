// The layering of the REST upstream and credential code, read from the import lines: the pure
// parts (core/rest, core/upstream) reach no runtime and no adapter; each adapter imports core
// and its libraries only, never another adapter. (Issue 12's boundary test takes these over.)
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const SRC = join(import.meta.dir, "../../src");

function filesUnder(dir: string): string[] {
  return readdirSync(join(SRC, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(SRC, join(e.parentPath, e.name)));
}

const importsOf = (path: string) => [...readFileSync(join(SRC, path), "utf8").matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s*["']([^"']+)["']/g)].map((m) => m[1]!);
const target = (from: string, spec: string) => (spec.startsWith(".") ? relative(SRC, join(SRC, from, "..", spec)) : spec);

test("core/rest and core/upstream: no runtime, no adapter, no command", () => {
  const files = [...filesUnder("core/rest"), ...filesUnder("core/upstream")];
  expect(files.length).toBeGreaterThan(8);
  for (const f of files) {
    const text = readFileSync(join(SRC, f), "utf8");
    expect(`${f}: ${/\bBun\.|process\.env|console\./.test(text)}`).toBe(`${f}: false`);
    for (const spec of importsOf(f)) {
      const t = target(f, spec);
      expect(`${f} -> ${t}`).not.toMatch(/ -> (adapters|commands|cli)\/|-> (bun|bun:.*|node:(fs|net|child_process|http|https)(\/.*)?)$/);
    }
  }
});

test("adapters import core and libraries, never another adapter or a command", () => {
  const files = filesUnder("adapters");
  expect(files.length).toBeGreaterThan(4);
  for (const f of files) {
    const own = f.split("/").slice(0, 2).join("/");
    for (const spec of importsOf(f)) {
      const t = target(f, spec);
      if (t.startsWith("adapters/")) expect(`${f} -> ${t}`).toStartWith(`${f} -> ${own}/`);
      expect(`${f} -> ${t}`).not.toMatch(/ -> (commands|cli)\//);
    }
  }
});
