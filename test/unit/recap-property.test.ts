// Property: whatever Unicode an agent writes, every recap keeps the rules of SPEC.md section 5.
// The seed is printed; replay a failure with RECAP_SEED=<seed> (and the path fast-check prints).
import { expect, test } from "bun:test";
import fc from "fast-check";
import { formatAmount } from "../../src/core/money/format.ts";
import { renderDecision, renderListLine, renderRecap, renderStepFailure, type StepFailure } from "../../src/core/recap/render.ts";
import { columns, priceText, recapCase, recapViolations, unicodeUnit } from "../helpers/recap-invariants.ts";

const RUNS = 10_000;
const seed = Number(process.env.RECAP_SEED ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0);
console.log(`recap property seed: ${seed} (replay with RECAP_SEED=${seed})`);

test(`recap invariants over random Unicode (${RUNS} cases, seed ${seed})`, () => {
  fc.assert(
    fc.property(recapCase, ({ stored, now, width }) => {
      expect(recapViolations(stored, renderRecap(stored, now, width), width)).toEqual([]);
    }),
    { numRuns: RUNS, seed },
  );
}, 120_000);

test(`list rows and decision rows over random Unicode (${RUNS / 10} cases, seed ${seed})`, () => {
  fc.assert(
    fc.property(recapCase, ({ stored, now }) => {
      const { ask } = stored;
      const money =
        ask.kind === "pay"
          ? `PAY ${formatAmount(ask.amount, ask.currency)} ${ask.currency} at `
          : ask.kind === "account"
            ? "ACCOUNT at "
            : `SPEND ${priceText(ask.price_mc, false)} on `;
      const list = renderListLine(stored, now);
      const approved = renderDecision({ ...stored, state: "approved", ...(ask.kind === "spend" ? {} : { ref: "demo-3e40a688" }) });
      const denied = renderDecision({ ...stored, state: "denied" });
      for (const row of [list, ...approved, ...denied]) expect(columns(row)).toBeLessThanOrEqual(76);
      // Built from the id, amount, currency and site only: a plain ASCII row in the approver's words.
      expect(list).toStartWith(`${ask.approval_id}  ${money}`);
      expect(approved[0]).toStartWith(`${ask.approval_id}: approved: ${money}`);
      expect(denied.length).toBe(1);
      expect(denied[0]).toStartWith(`${ask.approval_id}: denied: ${money}`);
      expect(approved[1]).toBe(
        ask.kind === "spend" ? "  the desk makes the call now; no step runs here" : "  demo-3e40a688: no money moved (reference approver)",
      );
      // A spend row names the stored tool, whole or cut at its end: never another tool's name.
      if (ask.kind === "spend") {
        for (const row of [list.replace(/ {2}expire[sd].*$/, ""), approved[0]!, denied[0]!]) {
          const tool = row.slice(row.indexOf(" on ") + 4);
          expect(tool === ask.tool || (tool.endsWith("...") && ask.tool.startsWith(tool.slice(0, -3)))).toBe(true);
        }
      }
      for (const row of [list, ...approved, ...denied]) expect(row).toMatch(/^[\x20-\x7e]+$/);
    }),
    { numRuns: RUNS / 10, seed },
  );
}, 60_000);

test(`a failed step's rows over random Unicode in its output (${RUNS / 10} cases, seed ${seed})`, () => {
  const text = fc.oneof(fc.string({ unit: unicodeUnit, maxLength: 400 }), fc.string({ unit: unicodeUnit, maxLength: 4000, size: "max" }));
  const failure: fc.Arbitrary<StepFailure> = fc.oneof(
    fc.record({ ref: fc.constant("exit_status" as const), exitCode: fc.integer({ min: 1, max: 255 }), signal: fc.constant(null), stderr: text }),
    fc.record({ ref: fc.constant("bad_first_line" as const), firstLine: text, stderr: text }),
    fc.record({ ref: fc.constant("timeout" as const), deadline: fc.constant("60s"), stderr: text }),
  );
  const hidden = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}]/u;
  fc.assert(
    fc.property(recapCase, failure, ({ stored }, f) => {
      if (stored.ask.kind === "spend") return;
      const rows = renderStepFailure({ ...stored, state: "failed", ref: f.ref }, f);
      expect(rows[0]).toStartWith(`${stored.ask.approval_id}: failed: `);
      expect(rows.at(-1)).toBe("  it is not run again: check by hand what it did");
      // The step's words are at most four rows per value, each after its label or the `>` marker.
      expect(rows.length).toBeLessThanOrEqual(2 + 2 * 5 + 1);
      for (const row of rows.slice(1)) {
        expect(columns(row)).toBeLessThanOrEqual(76);
        expect(hidden.test(row)).toBe(false);
        expect(row).toMatch(
          /^ {2}(the step |stderr: {4}\(from the step\)|line 1: {4}\(from the step\)|> {10}|\(\d+ more rows not shown\)|it is not run again)/,
        );
      }
    }),
    { numRuns: RUNS / 10, seed },
  );
}, 60_000);
