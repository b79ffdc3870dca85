// The tables of flags and variables (src/cli/flags.ts) against what `--help` prints and what
// SPEC.md's tables say: a flag's variable, default or requiredness written differently in any of
// the three fails here.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { APPROVER_FLAGS, CERTS_FLAGS, DESK_ENV, DESK_FLAGS, type EnvSetting, type Flag, SERVE_MCP_ENV, VERIFY_RECEIPT_FLAGS } from "../../src/cli/flags.ts";
import * as usage from "../../src/cli/usage.ts";
import { STEP_VARIABLES } from "../../src/commands/approver/step.ts";

const ROOT = join(import.meta.dir, "../..");
const SPEC = readFileSync(join(ROOT, "SPEC.md"), "utf8");

/** The entries of a help section (`Options:` or `Environment:`): head, and its text on one line. */
function helpEntries(text: string, section: "Options" | "Environment"): { head: string; text: string }[] {
  const lines = text.split("\n");
  const start = lines.findIndex((l) => l.startsWith(`${section}`));
  expect(start).toBeGreaterThanOrEqual(0);
  const entries: { head: string; text: string }[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line === "") break;
    const m = /^ {2}(\S+(?: [A-Z:.]+)?|-h, --help) {2,}(.*)$/.exec(line);
    if (m) entries.push({ head: m[1]!, text: m[2]! });
    else entries.at(-1)!.text += ` ${line.trim()}`;
  }
  return entries;
}

/** What an entry's text must say about a setting, and must not say about any other. */
function expectFacts(text: string, s: { env?: string; default?: string; required?: true }, others: readonly { env?: string }[]) {
  expect(text.includes("required")).toBe(s.required === true);
  if (s.default === undefined) expect(text).not.toContain("default:");
  else expect(text).toContain(`default: ${s.default}`);
  if (s.env !== undefined) expect(text).toContain(`env: ${s.env}`);
  else expect(text).not.toContain("env:");
  // The --max-amount / MAX_PENDING kind of slip: no entry names another setting's variable.
  // (Whole names only: ASK_ONLY_PAY_APPROVER_ON_APPROVE is a prefix of ..._ON_APPROVE_TIMEOUT.)
  for (const o of others) if (o.env !== undefined && o.env !== s.env) expect(text).not.toMatch(new RegExp(`env: ${o.env}(;|$)`));
}

const COMMANDS: [string, string, readonly Flag[]][] = [
  ["approver", usage.APPROVER_USAGE, APPROVER_FLAGS],
  ["desk", usage.DESK_USAGE, DESK_FLAGS],
  ["certs", usage.CERTS_USAGE, CERTS_FLAGS],
  ["verify-receipt", usage.VERIFY_RECEIPT_USAGE, VERIFY_RECEIPT_FLAGS],
];

describe("help is printed from the tables", () => {
  for (const [name, text, flags] of COMMANDS) {
    test(`${name} --help lists exactly its flags, each with its own variable, default and requiredness`, () => {
      const entries = helpEntries(text, "Options");
      expect(entries.map((e) => e.head)).toEqual([...flags.map((f) => (f.value ? `${f.name} ${f.value}` : f.name)), "-h, --help"]);
      flags.forEach((f, i) => {
        expectFacts(entries[i]!.text, f, flags);
      });
    });
  }

  for (const [name, text, settings] of [
    ["serve-mcp", usage.SERVE_MCP_USAGE, SERVE_MCP_ENV],
    ["desk", usage.DESK_USAGE, DESK_ENV],
  ] as [string, string, readonly EnvSetting[]][]) {
    test(`${name} --help lists exactly its variables with their defaults`, () => {
      const entries = helpEntries(text, "Environment");
      expect(entries.map((e) => e.head)).toEqual(settings.map((s) => s.env));
      settings.forEach((s, i) => {
        expectFacts(entries[i]!.text, { ...s, env: undefined }, []);
      });
    });
  }

  test("every ASK_ONLY_ variable the source names is in a table, so help shows it", () => {
    const named = new Set<string>();
    const walk = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []));
    for (const file of walk(join(ROOT, "src"))) for (const m of readFileSync(file, "utf8").matchAll(/ASK_ONLY_[A-Z_]+/g)) named.add(m[0]);
    named.delete("ASK_ONLY_VERSION"); // the build's --define, not a setting
    for (const given of STEP_VARIABLES) named.delete(given); // what the approver gives its --on-approve step
    const flagTables: readonly (readonly Flag[])[] = [APPROVER_FLAGS, CERTS_FLAGS, DESK_FLAGS, VERIFY_RECEIPT_FLAGS];
    const inTables = new Set<string | undefined>([
      ...flagTables.flatMap((t) => t.map((f) => f.env)),
      ...SERVE_MCP_ENV.map((s) => s.env),
      ...DESK_ENV.map((s) => s.env),
    ]);
    expect([...named].filter((n) => !inTables.has(n))).toEqual([]);
  });
});

/** The rows of the first Markdown table after `heading`, as cells. */
function specTable(heading: string): string[][] {
  const at = SPEC.indexOf(heading);
  expect(at).toBeGreaterThanOrEqual(0);
  const lines = SPEC.slice(at).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(
      line
        .slice(1, -1)
        .split(" | ")
        .map((c) => c.trim()),
    );
  }
  return rows;
}

const unquote = (cell: string) => cell.replaceAll("`", "");

describe("SPEC.md's tables say what the tables say", () => {
  test("7.1: the approver's flags, variables and defaults", () => {
    const rows = specTable("### 7.1 `ask-only approver`").map(([flag, env, dflt]) => ({ flag: unquote(flag!), env: unquote(env!), default: unquote(dflt!) }));
    expect(rows).toEqual(
      APPROVER_FLAGS.map((f) => ({
        flag: "value" in f ? `${f.name} ${f.value}` : f.name,
        env: "env" in f ? f.env : "—",
        // A switch has neither variable nor default (—); a setting without a default is off.
        default: "required" in f ? "(required)" : "default" in f ? f.default : "env" in f ? "(none)" : "—",
      })),
    );
  });

  test("7.2: serve-mcp's variables, and the default of each optional one", () => {
    const rows = specTable("### 7.2 `ask-only serve-mcp`");
    expect(rows.map(([env]) => unquote(env!))).toEqual(SERVE_MCP_ENV.map((s) => s.env));
    SERVE_MCP_ENV.forEach((s, i) => {
      const meaning = rows[i]![1]!;
      if ("default" in s) expect(meaning).toContain(`default ${s.default}`);
      else expect(meaning).not.toContain("optional");
    });
  });

  test("8.1: the desk's flags and defaults, in its table and its usage line", () => {
    const rows = specTable("### 8.1 Running the desk").flatMap(([flags, dflt]) =>
      [...flags!.matchAll(/`(--[a-z-]+)`/g)].map((m) => ({ flag: m[1], default: dflt === "—" || dflt === "off" ? undefined : unquote(dflt!) })),
    );
    expect(rows).toEqual(DESK_FLAGS.map((f) => ({ flag: f.name, default: "default" in f ? f.default : undefined })));
    const block = SPEC.slice(SPEC.indexOf("ask-only desk [--listen"), SPEC.indexOf("ask-only desk check --data DIR\n```"));
    const inUsage = [...block.matchAll(/\[?(--[a-z-]+)(?: ([A-Z:]+))?/g)].map((m) => (m[2] ? `${m[1]} ${m[2]}` : m[1]));
    expect(new Set(inUsage)).toEqual(new Set(DESK_FLAGS.map((f) => ("value" in f ? `${f.name} ${f.value}` : f.name))));
  });
});
