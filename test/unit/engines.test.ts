// The Node.js version the README states is one every installed package accepts: `npm ci` on it
// prints no EBADENGINE warning. Read from package-lock.json, so a dependency update that raises
// the floor fails here until the README (and package.json's engines) say so.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
  packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean }>;
};

/** "Node.js 20.11 or later" in the README's prerequisites, as a version. */
function statedMinimum(): string {
  const m = /^Node\.js (\d+)\.(\d+) or later and npm\./m.exec(README);
  expect(m).not.toBeNull();
  return `${m![1]}.${m![2]}.0`;
}

describe("the Node.js version the README states", () => {
  test("package.json's engines say the same", () => {
    expect(pkg.engines.node).toBe(`>=${statedMinimum()}`);
  });

  test("every package in the lock accepts it, and the Node.js on this machine", () => {
    const minimum = statedMinimum();
    // The real node, not the Node version Bun reports for itself.
    const installed = Bun.spawnSync(["node", "-p", "process.versions.node"]).stdout.toString().trim();
    expect(installed).toMatch(/^\d+\.\d+\.\d+$/);
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (range === undefined || path === "") continue;
      for (const version of [minimum, installed]) {
        if (!Bun.semver.satisfies(version, range)) refusing.push(`${path} wants node ${range}, refuses ${version}`);
      }
    }
    expect(refusing).toEqual([]);
  });

  test("the check can fail: a floor above the minimum is refused", () => {
    expect(Bun.semver.satisfies(statedMinimum(), ">=22.12.0")).toBe(false);
    expect(Bun.semver.satisfies(statedMinimum(), "^22.17.0 || >=24.0.0")).toBe(false);
  });
});
