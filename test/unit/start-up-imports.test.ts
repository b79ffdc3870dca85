// What a command loads before it answers. Building arktype's keyword scope costs more CPU than
// the rest of a desk's start (core/schema/ark.ts): the desk and serve-mcp must reach it only
// through that module's deferred load, never through a chain of static imports from their entry.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "../..");

type Metafile = { inputs: Record<string, { imports: { path: string; kind: string }[] }> };

/**
 * Every chain of imports evaluated with `entry` that ends in a module under one of `packages`:
 * static imports everywhere, and `require` calls inside dependencies (a CommonJS package runs
 * them as it loads). A `require` in our own sources is a deferred load and is not followed.
 */
async function chainsTo(entry: string, packages: readonly string[]): Promise<string[][]> {
  const built = await Bun.build({ entrypoints: [entry], target: "bun", metafile: true, throw: false } as Parameters<typeof Bun.build>[0]);
  expect(built.success).toBe(true);
  const inputs = (built as unknown as { metafile: Metafile }).metafile.inputs;
  const from = new Map<string, string | null>();
  const start = Object.keys(inputs).find((path) => resolve(root, path) === entry || resolve(path) === entry);
  expect(start).toBeDefined();
  from.set(start!, null);
  const queue = [start!];
  const chains: string[][] = [];
  while (queue.length > 0) {
    const module = queue.shift()!;
    for (const edge of inputs[module]?.imports ?? []) {
      const followed = edge.kind === "import-statement" || (edge.kind === "require-call" && module.includes("node_modules/"));
      if (!followed || from.has(edge.path)) continue;
      from.set(edge.path, module);
      if (packages.some((p) => edge.path.includes(`node_modules/${p}/`))) {
        const chain = [edge.path];
        for (let at: string | null | undefined = module; at; at = from.get(at)) chain.unshift(at);
        chains.push(chain);
        continue;
      }
      queue.push(edge.path);
    }
  }
  return chains;
}

const ARKTYPE = ["arktype", "@ark/schema", "@ark/util"];

describe("start-up imports", () => {
  for (const entry of ["src/main.ts", "src/commands/desk/index.ts", "src/commands/serve-mcp/index.ts"]) {
    test(`${entry}: no chain of static imports reaches arktype`, async () => {
      const chains = await chainsTo(join(root, entry), ARKTYPE);
      expect(chains.map((c) => c.join(" -> "))).toEqual([]);
    });
  }

  test("a desk that starts and clears a charged call builds no schema (and one built is seen)", async () => {
    const run = (...flags: string[]) => {
      const p = Bun.spawnSync([process.execPath, join(root, "test/fixtures/clearing-loads.ts"), ...flags], { stdout: "pipe", stderr: "pipe" });
      expect(p.exitCode).toBe(0);
      return JSON.parse(p.stdout.toString().trim().split("\n").at(-1)!) as { status: number; arktypeLoaded: boolean };
    };
    expect(run()).toEqual({ status: 200, arktypeLoaded: false });
    expect(run("--build-schema")).toEqual({ status: 200, arktypeLoaded: true });
  });

  test("the check finds a static import of arktype two modules down, and passes over a deferred require", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ask-only-imports-"));
    try {
      writeFileSync(join(dir, "schema.ts"), `import { type } from "arktype";\nexport const T = type("string");\n`);
      writeFileSync(join(dir, "middle.ts"), `export { T } from "./schema.ts";\n`);
      writeFileSync(join(dir, "deferred.ts"), `export const later = () => require("arktype");\n`);
      writeFileSync(join(dir, "entry.ts"), `import { T } from "./middle.ts";\nimport { later } from "./deferred.ts";\nconsole.log(T, later);\n`);
      // resolve arktype from the project's node_modules
      writeFileSync(join(dir, "package.json"), "{}");
      Bun.spawnSync(["ln", "-s", join(root, "node_modules"), join(dir, "node_modules")]);
      const chains = await chainsTo(join(dir, "entry.ts"), ARKTYPE);
      expect(chains.length).toBe(1);
      expect(chains[0]!.map((p) => p.replace(/.*\//, ""))).toEqual(["entry.ts", "middle.ts", "schema.ts", expect.stringMatching(/\.(m?js|ts)$/)]);
      expect(chains[0]!.at(-1)).toContain("node_modules/arktype/");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
