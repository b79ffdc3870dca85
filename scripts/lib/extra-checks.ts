// The MCP clients that are not ours (the MCP Inspector, the MCP conformance suite) live in their
// own package, checks/, with its own lock file: they declare Node >= 22, and the project's own
// install must stay free of engine warnings on the Node version the README states. The first
// extra check installs them (`npm ci` in checks/); `npm run checks:install` does it on purpose.
import { existsSync } from "node:fs";
import { resolve } from "node:path";

const dir = resolve(import.meta.dir, "../../checks");
const scope = resolve(dir, "node_modules/@modelcontextprotocol");

export const INSPECTOR = resolve(scope, "inspector/clients/launcher/build/index.js");
export const CONFORMANCE = resolve(scope, "conformance/dist/index.js");

/** Installs checks/ when one of `paths` is missing; exits 1 if that fails. */
export function requireExtraChecks(...paths: string[]): void {
  if (paths.every((p) => existsSync(p))) return;
  console.error("extra checks: installing checks/ (npm ci)");
  const r = Bun.spawnSync(["npm", "ci", "--no-audit", "--no-fund"], { cwd: dir, stdout: "inherit", stderr: "inherit" });
  const missing = paths.filter((p) => !existsSync(p));
  if (r.exitCode !== 0 || missing.length > 0) {
    console.error(`extra checks: npm ci in ${dir} failed (exit ${r.exitCode}); missing: ${missing.join(", ") || "nothing"}`);
    process.exit(1);
  }
}
