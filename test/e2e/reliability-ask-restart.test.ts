// The approver killed in the middle of a stream of asks and decisions, and restarted on the same
// ledger (SPEC 6, 7.1): a small run of `npm run soak:approver`, one SIGKILL and one SIGTERM.
import { expect, setDefaultTimeout, test } from "bun:test";
import { formatRestartSummary, run } from "../../scripts/soak/approver-restart.ts";

setDefaultTimeout(120_000);

test("restarts mid-stream: nothing pending lost, nothing decided changed, no id accepted twice", async () => {
  const s = await run({ cycles: 2, asksPerCycle: 20, decisionsPerCycle: 5, senders: 2, seed: Number(process.env.SOAK_SEED ?? 20261130) });
  if (s.failures.length > 0) console.log(formatRestartSummary(s));
  expect(s.failures).toEqual([]);
  expect(s.kills).toEqual({ SIGKILL: 1, SIGTERM: 1 });
  expect(s.accepted).toBeGreaterThanOrEqual(40);
  expect(s.decisionsConfirmed).toBeGreaterThanOrEqual(10);
  // The final pass sends every accepted id again; each was refused.
  expect(s.replaysRefused).toBeGreaterThanOrEqual(s.accepted);
  expect(s.redecisionsRefused).toBeGreaterThan(0);
});
