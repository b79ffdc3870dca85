// Compiles src/main.ts into one self-contained executable, dist/ask-only, with the version
// baked in. Run with `npm run build`.
import { $ } from "bun";
import pkg from "./package.json" with { type: "json" };

const outfile = "dist/ask-only";
const started = performance.now();
await $`bun build --compile --minify --format=esm --bytecode src/main.ts --outfile ${outfile} --define ASK_ONLY_VERSION=${JSON.stringify(pkg.version)}`.quiet();
console.error(`built ${outfile} ${pkg.version} in ${Math.round(performance.now() - started)} ms`);
