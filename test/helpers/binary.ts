// Runs the compiled binary (dist/ask-only) as a real process, as a person or CI would.
import { existsSync } from "node:fs";
import { resolve } from "node:path";

export const BINARY = resolve(import.meta.dir, "../../dist/ask-only");

if (!existsSync(BINARY)) {
  throw new Error(`${BINARY} is missing: run \`npm run build\` (npm test does it first)`);
}

/** The environment every test process gets: no colour, UTC, and nothing else inherited. */
export function testEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp", NO_COLOR: "1", TZ: "Etc/UTC", ...extra };
}

export type RunResult = { code: number; stdout: string; stderr: string };

export async function runBinary(args: string[], options: { env?: Record<string, string>; cwd?: string; stdin?: string } = {}): Promise<RunResult> {
  const proc = Bun.spawn([BINARY, ...args], {
    env: testEnv(options.env),
    cwd: options.cwd,
    stdin: options.stdin === undefined ? "ignore" : new TextEncoder().encode(options.stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}
