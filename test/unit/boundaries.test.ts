// The house rules of the source tree, read from the import lines and the tsconfig files (cheap,
// and it fails loudly). README's "Layout" says what each folder holds; these keep it true:
//   core/        imports no command, adapter or web code, and never reads env, exits or prints
//   core/desk/   the desk domain: no runtime (no Bun, no SQLite, no MCP SDK, no files or sockets)
//   adapters/    implement core's ports; each imports core and its libraries, never another adapter
//   commands/    one folder per subcommand; they never import each other
//   web/         the browser's code: only web/ and browser-safe core, and only it sees the DOM
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";

const ROOT = join(import.meta.dir, "../..");
const SRC = join(ROOT, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : /\.(ts|tsx)$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}

type SourceFile = { path: string; text: string };

const files: SourceFile[] = sourceFiles(SRC).map((path) => ({ path: relative(SRC, path), text: readFileSync(path, "utf8") }));
const byPath = new Map(files.map((f) => [f.path, f]));

function importsOf(text: string): string[] {
  const specs: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s*["']([^"']+)["']/g)) specs.push(m[1]!);
  for (const m of text.matchAll(/(?:^|\n)\s*import\s*["']([^"']+)["']/g)) specs.push(m[1]!);
  for (const m of text.matchAll(/import\(\s*["']([^"']+)["']\s*\)/g)) specs.push(m[1]!);
  return specs;
}

/** What an import names: a path under src/ for a relative import, else the package or builtin. */
const targetOf = (from: string, spec: string) => (spec.startsWith(".") ? relative(SRC, join(SRC, dirname(from), spec)) : spec);

/** Every `file -> target` edge of the files under `prefix`. */
function edgesUnder(prefix: string): string[] {
  return files.filter((f) => f.path.startsWith(prefix)).flatMap((f) => importsOf(f.text).map((spec) => `${f.path} -> ${targetOf(f.path, spec)}`));
}

const under = (prefix: string) => files.filter((f) => f.path.startsWith(prefix));

/** Files whose text matches `re`, as `path: true` lines (empty when none does). */
const matching = (fs: SourceFile[], re: RegExp) => fs.filter((f) => re.test(f.text)).map((f) => `${f.path}: ${re.exec(f.text)?.[0]}`);

/** tsconfig files allow comments; these hold none inside strings. */
const readTsconfig = (path: string) =>
  JSON.parse(readFileSync(join(ROOT, path), "utf8").replace(/^\s*\/\/.*$/gm, "")) as {
    compilerOptions?: { lib?: string[]; types?: string[] };
    include?: string[];
    exclude?: string[];
  };

/** The source files a program starting at `entries` reads, following relative imports (type imports too). */
function importGraph(entries: string[]): Set<string> {
  const seen = new Set<string>();
  const visit = (path: string) => {
    if (seen.has(path)) return;
    seen.add(path);
    for (const spec of importsOf(byPath.get(path)?.text ?? "")) {
      const t = targetOf(path, spec);
      if (spec.startsWith(".") && byPath.has(t)) visit(t);
    }
  };
  for (const e of entries) visit(e);
  return seen;
}

describe("source boundaries", () => {
  test("the scan sees the tree", () => {
    for (const dir of ["core/desk/", "core/http/", "adapters/sqlite/", "adapters/postgres/", "adapters/mcp-upstream/", "commands/desk/", "web/console/"]) {
      expect(`${dir}: ${under(dir).length >= 2}`).toBe(`${dir}: true`);
    }
    expect(files.some((f) => f.path === "main.ts")).toBe(true);
  });

  test("core imports nothing from commands, cli, adapters or web, and never reads env, exits or prints", () => {
    expect(edgesUnder("core/").filter((e) => / -> (commands|cli|adapters|web)\//.test(e))).toEqual([]);
    expect(matching(under("core/"), /process\.env|process\.exit|console\.(log|error|warn|info)|process\.std(out|err)/)).toEqual([]);
  });

  test("the desk domain (core/desk) reaches the world only through its ports: no runtime, storage, SDK, files or sockets", () => {
    const forbidden = / -> (bun|bun:.*|@modelcontextprotocol\/.*|node:(fs|net|child_process|http|https|os|path|worker_threads)(\/.*)?)$/;
    expect(edgesUnder("core/desk/").filter((e) => forbidden.test(e))).toEqual([]);
    expect(matching(under("core/desk/"), /\bBun\.|\bnew Worker\b|\bsetInterval\(/)).toEqual([]);
  });

  test("core/rest and core/upstream: no runtime, no files or sockets", () => {
    const forbidden = / -> (bun|bun:.*|node:(fs|net|child_process|http|https)(\/.*)?)$/;
    expect([...edgesUnder("core/rest/"), ...edgesUnder("core/upstream/")].filter((e) => forbidden.test(e))).toEqual([]);
    expect(matching([...under("core/rest/"), ...under("core/upstream/")], /\bBun\.|console\./)).toEqual([]);
  });

  test("core/finance imports only core, node:crypto and arktype, and never touches the network, a timer or a clock", () => {
    expect(edgesUnder("core/finance/").filter((e) => !/ -> (core\/|node:crypto$|arktype$)/.test(e))).toEqual([]);
    expect(matching(under("core/finance/"), /\b(fetch|Bun\.|setTimeout|setInterval|Date\.now|Math\.random|process\.)/)).toEqual([]);
  });

  test("adapters import core and their libraries, never another adapter, a command, the CLI or the web code", () => {
    const wrong = edgesUnder("adapters/").filter((e) => {
      const [from, to] = e.split(" -> ") as [string, string];
      const own = from.split("/").slice(0, 2).join("/");
      return /^(commands|cli|web)\//.test(to) || (to.startsWith("adapters/") && !to.startsWith(`${own}/`));
    });
    expect(wrong).toEqual([]);
  });

  test("commands never import each other", () => {
    const wrong = edgesUnder("commands/").filter((e) => {
      const [from, to] = e.split(" -> ") as [string, string];
      const own = from.split("/").slice(0, 2).join("/").replace(/\.ts$/, "");
      return to.startsWith("commands/") && !to.startsWith(own);
    });
    expect(wrong).toEqual([]);
  });

  test("the desk's faces call the domain: no ledger, no SQLite adapter (only start-up opens them)", () => {
    const faces = under("commands/desk/").filter((f) => !["commands/desk/index.ts", "commands/desk/data-dir.ts"].includes(f.path));
    expect(faces.length).toBeGreaterThanOrEqual(6);
    expect(matching(faces, /\.ledger\b|adapters\/sqlite\//)).toEqual([]);
  });

  test("only adapters/sqlite touches SQLite", () => {
    expect(files.filter((f) => importsOf(f.text).includes("bun:sqlite") && !f.path.startsWith("adapters/sqlite/")).map((f) => f.path)).toEqual([]);
  });

  test("only adapters/postgres uses Bun's SQL client, and it reaches only core, bun, node:fs and node:net", () => {
    const sqlClient = /(?:^|\n)\s*import\b[^;]*\bSQL\b[^;]*from\s*["']bun["']|\bBun\.(SQL|sql)\b/;
    expect(
      matching(
        files.filter((f) => !f.path.startsWith("adapters/postgres/")),
        sqlClient,
      ),
    ).toEqual([]);
    expect(under("adapters/postgres/").length).toBeGreaterThanOrEqual(8);
    expect(edgesUnder("adapters/postgres/").filter((e) => !/ -> (core\/|adapters\/postgres\/|bun$|node:fs$|node:net$)/.test(e))).toEqual([]);
  });

  test("the MCP SDK is imported only by serve-mcp, the desk's MCP endpoint and the MCP upstream adapter", () => {
    const users = files.filter((f) => importsOf(f.text).some((s) => s.startsWith("@modelcontextprotocol/"))).map((f) => f.path);
    expect(users.filter((p) => !/^(commands\/serve-mcp\/|commands\/desk\/mcp\.ts$|adapters\/mcp-upstream\/)/.test(p))).toEqual([]);
    expect(users).toContain("adapters/mcp-upstream/client.ts");
  });

  test("named exports only", () => {
    expect(matching(files, /\bexport\s+default\b/)).toEqual([]);
  });
});

describe("the browser's code and the server's", () => {
  const webEntries = under("web/").map((f) => f.path);
  const webProgram = importGraph(webEntries);

  test("the server's program has no DOM and leaves out src/web; the console's has the DOM and no runtime types", () => {
    const server = readTsconfig("tsconfig.json");
    expect(server.compilerOptions?.lib?.some((l) => /^dom/i.test(l))).toBe(false);
    expect(server.exclude).toContain("src/web");
    const web = readTsconfig("src/web/console/tsconfig.json");
    expect(web.compilerOptions?.lib).toContain("DOM");
    expect(web.compilerOptions?.types).toEqual([]);
    expect(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts.typecheck).toContain("tsc --noEmit -p src/web/console");
  });

  test("the console reads only web/ and browser-safe core: no runtime, no Node builtins, no adapters or commands", () => {
    const outside = [...webProgram].filter((p) => !p.startsWith("web/"));
    // It does share the wire shapes and the millicent formatting (so this test cannot pass empty).
    expect(outside).toContain("core/desk/wire.ts");
    expect(outside).toContain("core/money/millicents.ts");
    expect(outside.filter((p) => !p.startsWith("core/"))).toEqual([]);
    const shared = outside.map((p) => byPath.get(p)!);
    expect(
      shared.flatMap((f) =>
        importsOf(f.text)
          .filter((s) => /^(bun|bun:.*|node:.*)$/.test(s))
          .map((s) => `${f.path} -> ${s}`),
      ),
    ).toEqual([]);
    expect(matching(shared, /\bBun\.|\bBuffer\b|process\./)).toEqual([]);
  });

  test("no server file names the browser's storage or elements (the server's program, without the DOM, would not compile them either)", () => {
    const server = files.filter((f) => !f.path.startsWith("web/"));
    expect(matching(server, /\b(sessionStorage|localStorage|HTMLElement|HTMLInputElement|customElements)\b/)).toEqual([]);
  });
});
