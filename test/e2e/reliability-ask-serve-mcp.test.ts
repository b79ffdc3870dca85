// serve-mcp under random tool calls (SPEC 7.2), through the MCP SDK's client over stdio to the
// compiled binary, with a real approver behind a recording mTLS relay: a small run of
// `npm run fuzz:serve-mcp`.
import { expect, setDefaultTimeout, test } from "bun:test";
import { formatSummary } from "../../scripts/fuzz/common.ts";
import { run } from "../../scripts/fuzz/serve-mcp.ts";

setDefaultTimeout(120_000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261130);

test("fuzz: 200 random tool calls; only codes or exact shapes, no echo, no card number anywhere, nothing refused crosses the link", async () => {
  const s = await run({ runs: 200, seed: SEED, concurrency: 4 });
  if (s.failures.length > 0) console.log(formatSummary("fuzz:serve-mcp", s, { kinds: s.byKind, answers: s.byAnswer }));
  expect(s.failures).toEqual([]);
  for (const kind of ["valid", "status-created", "unicode-field", "wrong-type", "card-number", "extra-field", "unknown-tool"]) {
    expect(s.byKind[kind] ?? 0).toBeGreaterThan(0);
  }
  expect(s.created).toBeGreaterThan(5);
  expect(s.cardsTried).toBeGreaterThan(10);
  expect(s.byAnswer["error CARD_NUMBER_REFUSED"]).toBe(s.byKind["card-number"]);
  expect(s.byAnswer["status pending"] ?? 0).toBeGreaterThan(0);
});
