// Compiles src/main.ts into one self-contained executable, dist/ask-only, with the version
// baked in. Run with `npm run build`.
import { renameSync } from "node:fs";
import { $ } from "bun";
import pkg from "./package.json" with { type: "json" };
import { WORKER_ENTRIES } from "./src/worker-entries.ts";

const outfile = "dist/ask-only";
// Build beside the target and rename into place, so a process starting the binary meanwhile
// never runs a half-written file.
const partial = `dist/.ask-only.${process.pid}`;
// The worker threads' entry files are built into the binary beside main.ts (see src/worker-entries.ts).
const workerEntries = Object.values(WORKER_ENTRIES).map((path) => `src/${path.replace(/^\.\//, "")}`);
const started = performance.now();
await $`bun build --compile --minify --format=esm --bytecode src/main.ts ${workerEntries} --outfile ${partial} --define ASK_ONLY_VERSION=${JSON.stringify(pkg.version)}`.quiet();
renameSync(partial, outfile);
console.error(`built ${outfile} ${pkg.version} in ${Math.round(performance.now() - started)} ms`);
