// Group commit never answers before it commits: the moment an agent's answer exists, its receipt
// (and the money it moved) is readable from another connection to the ledger file, i.e. it is in
// the WAL and survives a SIGKILL of the desk (the soak, scripts/soak/desk.ts, checks the same
// thing across real kills). Calls are queued together so they share group commits.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, type TestDesk } from "./desk-harness.ts";

let fx: UpstreamFixture;
let t: TestDesk;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo", "fx__fail_5xx"], priceMc: 1_000, upstreamCostMc: 0 }, { upstreamTimeoutMs: 5_000 });
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

test("every answer's receipt and money are committed (seen by another connection) when the answer exists", async () => {
  // Ten keys with 20 calls each (a key's failed and running calls stay within its 20 an hour).
  const keys: { keyId: string; secret: string }[] = [];
  for (let i = 0; i < 10; i++) keys.push(await t.makeKey({ budget_mc: 1_000_000_000, reset: "daily", allow: ["fx__echo", "fx__fail_5xx"] }));
  // Room for exactly 5 echo calls: the 15 other calls of this key are refused with a receipt.
  const tight = await t.makeKey({ budget_mc: 5_000, reset: "none", allow: ["fx__echo"] });
  const other = new Database(t.dbPath, { readonly: true });
  try {
    const receiptRow = other.query("SELECT outcome, amount_mc FROM receipts WHERE id = ?");
    const reservationOf = other.query("SELECT state FROM reservations WHERE receipt_id = ?");
    const seen: string[] = [];
    // 220 calls at once: the charges, refunds and refusals of one turn share commits.
    await Promise.all(
      Array.from({ length: 220 }, async (_, i) => {
        const tool = i < 200 && i % 5 === 0 ? "fx__fail_5xx" : "fx__echo";
        const r = await t.call(i < 200 ? keys[Math.floor(i / 20)]!.secret : tight.secret, tool, tool === "fx__echo" ? { text: `n${i}` } : {});
        // Checked in the answer's first continuation, before anything else can run a commit.
        const id = r.headers.get("x-clearing-receipt-id");
        const outcome = r.headers.get("x-clearing-outcome");
        const row = id === null ? null : (receiptRow.get(id) as { outcome: string; amount_mc: number } | null);
        seen.push(
          `${outcome} ${row?.outcome ?? "MISSING"} ${id === null || outcome === "refused_budget" ? "-" : ((reservationOf.get(id) as { state: string } | null)?.state ?? "MISSING")}`,
        );
        await r.arrayBuffer();
      }),
    );
    const counts: Record<string, number> = {};
    for (const line of seen) counts[line] = (counts[line] ?? 0) + 1;
    expect(counts).toEqual({
      "charged charged settled": 165,
      "refused_budget refused_budget -": 15,
      "refunded_upstream_error refunded_upstream_error settled": 40,
    });
    const spentOf = (id: string) => (other.query("SELECT spent_mc FROM keys WHERE id = ?").get(id) as { spent_mc: number }).spent_mc;
    for (const k of keys) expect(spentOf(k.keyId)).toBe(16_000);
    expect(spentOf(tight.keyId)).toBe(5_000);
  } finally {
    other.close();
  }
});
