// The long run of the recap property test: random hostile asks (any code point, lone
// surrogates, controls, bidi, tags, combining stacks, wide characters) through renderRecap,
// every invariant of SPEC.md section 5 checked on every case.
// Usage: bun scripts/fuzz-recap.ts [--runs N] [--seed S]   (default 1,000,000 runs, random seed)
import fc from "fast-check";
import { renderRecap } from "../src/core/recap/render.ts";
import { recapCase, recapViolations } from "../test/helpers/recap-invariants.ts";

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

const runs = Number(flag("--runs") ?? 1_000_000);
const seed = Number(flag("--seed") ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0);
if (!Number.isSafeInteger(runs) || runs < 1 || !Number.isSafeInteger(seed)) {
  console.error("usage: bun scripts/fuzz-recap.ts [--runs N] [--seed S]");
  process.exit(2);
}

console.log(`fuzz:recap seed ${seed}, ${runs} runs (replay: bun scripts/fuzz-recap.ts --seed ${seed} --runs ${runs})`);
let rows = 0;
let longest = 0;
const started = Bun.nanoseconds();
const result = fc.check(
  fc.property(recapCase, ({ stored, now, width }) => {
    const lines = renderRecap(stored, now, width);
    rows += lines.length;
    if (lines.length > longest) longest = lines.length;
    const bad = recapViolations(stored, lines, width);
    if (bad.length > 0) throw new Error(bad.join("; "));
  }),
  { numRuns: runs, seed },
);
const seconds = (Bun.nanoseconds() - started) / 1e9;
if (result.failed) {
  console.log(fc.defaultReportMessage(result));
  process.exit(1);
}
console.log(
  `ok: ${result.numRuns} recaps, ${rows} rows (longest recap ${longest} rows), ${seconds.toFixed(1)} s, ${Math.round(result.numRuns / seconds)} recaps/s checked`,
);
