// Property: whatever Unicode an agent writes, every recap keeps the rules of SPEC.md section 5.
// The seed is printed; replay a failure with RECAP_SEED=<seed> (and the path fast-check prints).
import { expect, test } from "bun:test";
import fc from "fast-check";
import { renderRecap } from "../../src/core/recap/render.ts";
import { recapCase, recapViolations } from "../helpers/recap-invariants.ts";

const RUNS = 10_000;
const seed = Number(process.env.RECAP_SEED ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0);

test(`recap invariants over random Unicode (${RUNS} cases, seed ${seed})`, () => {
  console.log(`recap property seed: ${seed} (replay with RECAP_SEED=${seed})`);
  fc.assert(
    fc.property(recapCase, ({ stored, now, width }) => {
      expect(recapViolations(stored, renderRecap(stored, now, width), width)).toEqual([]);
    }),
    { numRuns: RUNS, seed },
  );
}, 120_000);
