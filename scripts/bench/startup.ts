// Start-up of the compiled binary: `ask-only --help` and `--version`, and a desk until it
// listens and until it answers `GET /healthz` (on one data directory, made by the first start),
// median of N runs, next to the floor measured in the same run (an empty program compiled with
// the same flags).
// Usage: bun scripts/bench/startup.ts [--runs N]
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { $ } from "bun";
import { quantile, startDesk } from "./lib/measure.ts";

const runs = Number(process.argv[process.argv.indexOf("--runs") + 1]) || 10;
const binary = resolve(import.meta.dir, "../../dist/ask-only");

function medianMs(argv: string[]): number {
  const times: number[] = [];
  for (let i = 0; i < runs + 1; i++) {
    const t = Bun.nanoseconds();
    const p = Bun.spawnSync(argv, { stdout: "ignore", stderr: "ignore" });
    if (p.exitCode !== 0) throw new Error(`${argv.join(" ")} exited ${p.exitCode}`);
    if (i > 0) times.push((Bun.nanoseconds() - t) / 1e6); // the first run warms the page cache
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** Median milliseconds until the desk listens and until it answers; the first start (which makes the ledger) is not counted. */
async function deskMs(data: string): Promise<{ listen: number; answer: number }> {
  const listen: number[] = [];
  const answer: number[] = [];
  for (let i = 0; i < runs + 1; i++) {
    const t = Bun.nanoseconds();
    const desk = await startDesk([binary], "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz", { data });
    const listening = (Bun.nanoseconds() - t) / 1e6;
    const health = await fetch(`${desk.url}/healthz`);
    await health.arrayBuffer();
    if (health.status !== 200) throw new Error(`GET /healthz answered ${health.status}`);
    const answered = (Bun.nanoseconds() - t) / 1e6;
    await desk.stop();
    if (i > 0) {
      listen.push(listening);
      answer.push(answered);
    }
  }
  return { listen: quantile(listen, 0.5), answer: quantile(answer, 0.5) };
}

const dir = mkdtempSync(join(tmpdir(), "ask-only-bench-"));
try {
  writeFileSync(join(dir, "empty.ts"), 'console.log("0");\n');
  await $`bun build --compile --minify --format=esm --bytecode ${join(dir, "empty.ts")} --outfile ${join(dir, "empty")}`.quiet();
  const floor = medianMs([join(dir, "empty")]);
  const help = medianMs([binary, "--help"]);
  const version = medianMs([binary, "--version"]);
  const certsHelp = medianMs([binary, "certs", "--help"]);
  const desk = await deskMs(join(dir, "desk"));
  console.log(`runs: ${runs} each (median)`);
  console.log(`empty compiled program (floor): ${floor.toFixed(1)} ms`);
  console.log(`ask-only --help:       ${help.toFixed(1)} ms  (${(help / floor).toFixed(2)}x the floor)`);
  console.log(`ask-only --version:    ${version.toFixed(1)} ms  (${(version / floor).toFixed(2)}x the floor)`);
  console.log(`ask-only certs --help: ${certsHelp.toFixed(1)} ms  (${(certsHelp / floor).toFixed(2)}x the floor)`);
  console.log(`ask-only desk, listening: ${desk.listen.toFixed(1)} ms  (${(desk.listen / floor).toFixed(2)}x the floor)`);
  console.log(`ask-only desk, first answer: ${desk.answer.toFixed(1)} ms  (${(desk.answer / floor).toFixed(2)}x the floor; at most 150 ms)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
