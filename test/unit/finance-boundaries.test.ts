// The finance pieces' place in the tree, read from their import lines: core/finance is pure
// (core, node:crypto and arktype only: no runtime, no fetch, no SQLite, no adapter), and
// adapters/webhooks reaches only into core.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const SRC = join(import.meta.dir, "../../src");

function filesUnder(dir: string): { path: string; text: string }[] {
  return readdirSync(join(SRC, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : e.name.endsWith(".ts") ? [{ path: join(dir, e.name), text: readFileSync(join(SRC, dir, e.name), "utf8") }] : [],
  );
}

function importsOf(text: string): string[] {
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s*["']([^"']+)["']/g), ...text.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)].map((m) => m[1]!);
}

const target = (from: string, spec: string) => (spec.startsWith(".") ? relative(SRC, join(SRC, from, "..", spec)) : spec);

describe("finance boundaries", () => {
  const core = filesUnder("core/finance");
  const adapters = filesUnder("adapters/webhooks");

  test("the scan sees both folders", () => {
    expect(core.length).toBeGreaterThanOrEqual(5);
    expect(adapters.length).toBeGreaterThanOrEqual(1);
  });

  test("core/finance imports only core, node:crypto and arktype, and never touches the network, a timer or a clock", () => {
    for (const f of core) {
      for (const spec of importsOf(f.text)) expect(`${f.path} -> ${target(f.path, spec)}`).toMatch(/ -> (core\/|node:crypto$|arktype$)/);
      expect(`${f.path}: ${/\b(fetch|Bun\.|setTimeout|setInterval|Date\.now|Math\.random|process\.)/.test(f.text)}`).toBe(`${f.path}: false`);
    }
  });

  test("adapters/webhooks imports only core (and its own folder)", () => {
    for (const f of adapters) {
      for (const spec of importsOf(f.text)) expect(`${f.path} -> ${target(f.path, spec)}`).toMatch(/ -> (core\/|adapters\/webhooks\/)/);
    }
  });
});
