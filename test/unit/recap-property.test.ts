// Property: whatever Unicode an agent writes, every recap keeps the rules of SPEC.md section 5.
// The seed is printed; replay a failure with RECAP_SEED=<seed> (and the path fast-check prints).
import { expect, test } from "bun:test";
import fc from "fast-check";
import { formatAmount } from "../../src/core/money/format.ts";
import { renderDecision, renderListLine, renderRecap } from "../../src/core/recap/render.ts";
import { columns, priceText, recapCase, recapViolations } from "../helpers/recap-invariants.ts";

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
        ask.kind === "pay" ? `PAY ${formatAmount(ask.amount, ask.currency)} ${ask.currency} at ` : ask.kind === "account" ? "ACCOUNT at " : `SPEND ${priceText(ask.price_mc, false)} on `;
      const list = renderListLine(stored, now);
      const approved = renderDecision({ ...stored, state: "approved", ...(ask.kind === "spend" ? {} : { ref: "demo-3e40a688" }) });
      const denied = renderDecision({ ...stored, state: "denied" });
      for (const row of [list, ...approved, ...denied]) expect(columns(row)).toBeLessThanOrEqual(76);
      // Built from the id, amount, currency and site only: a plain ASCII row in the approver's words.
      expect(list).toStartWith(`${ask.approval_id}  ${money}`);
      expect(approved[0]).toStartWith(`${ask.approval_id}: approved: ${money}`);
      expect(denied.length).toBe(1);
      expect(denied[0]).toStartWith(`${ask.approval_id}: denied: ${money}`);
      expect(approved[1]).toBe(ask.kind === "spend" ? "  the desk makes the call now; no step runs here" : "  demo-3e40a688: no money moved (reference approver)");
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
