// The house rules of the source tree, read from the import lines (cheap, and it fails loudly).
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const SRC = join(import.meta.dir, "../../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.(ts|tsx)$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

const files = sourceFiles(SRC).map((path) => ({ path: relative(SRC, path), text: readFileSync(path, "utf8") }));

function importsOf(text: string): string[] {
  const specs: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s*["']([^"']+)["']/g)) specs.push(m[1]!);
  for (const m of text.matchAll(/(?:^|\n)\s*import\s*["']([^"']+)["']/g)) specs.push(m[1]!);
  for (const m of text.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)) specs.push(m[1]!);
  return specs;
}

describe("source boundaries", () => {
  test("the scan sees the tree", () => {
    expect(files.some((f) => f.path === "main.ts")).toBe(true);
    expect(files.some((f) => f.path.startsWith("core/"))).toBe(true);
  });

  test("core imports nothing from commands or cli, and never reads env, exits or prints", () => {
    for (const f of files.filter((f) => f.path.startsWith("core/"))) {
      for (const spec of importsOf(f.text)) expect(`${f.path}: ${spec}`).not.toMatch(/: .*\/(commands|cli)\//);
      expect(`${f.path}: ${/process\.env|process\.exit|console\.(log|error|warn|info)|process\.std(out|err)/.test(f.text)}`).toBe(`${f.path}: false`);
    }
  });

  test("only adapters/sqlite touches SQLite", () => {
    for (const f of files) {
      if (importsOf(f.text).includes("bun:sqlite")) expect(f.path).toStartWith("adapters/sqlite/");
    }
  });

  test("the MCP SDK is imported only by the MCP-speaking commands and the MCP upstream adapter", () => {
    for (const f of files) {
      if (importsOf(f.text).some((s) => s.startsWith("@modelcontextprotocol/"))) {
        expect(f.path).toMatch(/^(commands\/(serve-mcp|desk)|adapters\/mcp-upstream)\//);
      }
    }
  });

  test("commands never import each other", () => {
    for (const f of files.filter((f) => f.path.startsWith("commands/"))) {
      const own = f.path.split("/").slice(0, 2).join("/").replace(/\.ts$/, "");
      for (const spec of importsOf(f.text)) {
        if (!spec.startsWith(".")) continue;
        const target = relative(SRC, join(SRC, f.path, "..", spec));
        if (target.startsWith("commands/")) expect(`${f.path} -> ${target}`).toStartWith(`${f.path} -> ${own}`);
      }
    }
  });

  test("named exports only", () => {
    for (const f of files) expect(`${f.path}: ${/\bexport\s+default\b/.test(f.text)}`).toBe(`${f.path}: false`);
  });
});
