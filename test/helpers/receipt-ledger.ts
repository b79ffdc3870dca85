// A ledger filled with many real receipts, fast: each is a reservation and its settlement through
// the ledger port (64 in flight, so the SQLite ledger group-commits them), signed by the desk's
// own receipt maker, over several keys of one org. What `desk check` and its benchmark read.
import { hourOf, periodOf } from "../../src/core/desk/period.ts";
import type { DeskLedger } from "../../src/core/desk/ports.ts";
import type { DeskKey } from "../../src/core/desk/records.ts";
import { Signing } from "../../src/core/desk/signing.ts";
import { generateSigningKey, loadSigner, type ReceiptSigner } from "../../src/core/receipt/index.ts";

export type FilledLedger = { signer: ReceiptSigner; signing: Signing; orgId: string; keyIds: string[] };

/**
 * Adds `receipts` charged receipts to `ledger` over `keys` keys (one org). (Refunds count against
 * each key's hourly failure limit, so a fill this size charges every call.) `onProgress` sees the
 * count now and then.
 */
export async function fillReceipts(
  ledger: Pick<DeskLedger, "orgs" | "keys" | "money" | "records">,
  receipts: number,
  options: { keys?: number; signerPem?: string; onProgress?: (done: number) => void } = {},
): Promise<FilledLedger> {
  const signer = loadSigner(options.signerPem ?? generateSigningKey().privatePem);
  const signing = new Signing(signer, ledger.records, () => {}, Date.now);
  await signing.publish();
  const orgId = `org_fill_${Date.now().toString(36)}`;
  await ledger.orgs.create({ id: orgId, name: orgId, createdAt: Date.now() });
  const keys: DeskKey[] = [];
  for (let i = 0; i < (options.keys ?? 32); i++) {
    const id = `${orgId}_key_${i}`;
    await ledger.keys.create({
      id,
      orgId,
      name: id,
      lookup: `${id}_lookup`,
      secretSha256: new Uint8Array(32),
      budgetMc: 1e12,
      reset: "none",
      period: "none",
      allow: ["fx__echo"],
      prices: {},
      expiresAt: null,
      now: Date.now(),
    });
    keys.push((await ledger.keys.get(id))!);
  }
  const make = signing.receiptMaker().make;
  let next = 0;
  const one = async (i: number) => {
    const now = Date.now();
    const key = keys[i % keys.length]!;
    const ctx = { key, tool: "fx__echo", priceMc: 7, upstreamCostMc: 2, paramsSha256: "a".repeat(64), now, hour: hourOf(now), period: periodOf("none", now) };
    const r = await ledger.money.reserve(ctx, make);
    if (r.kind !== "reserved") throw new Error(`fill: reservation ${r.kind}`);
    await ledger.money.settle({ reservationId: r.reservationId, outcome: "charged", resultSha256: "b".repeat(64), now: Date.now() }, make);
  };
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < receipts) {
        const i = next++;
        await one(i);
        if (i % 10_000 === 0) options.onProgress?.(i);
      }
    }),
  );
  return { signer, signing, orgId, keyIds: keys.map((k) => k.id) };
}
