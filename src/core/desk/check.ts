// `desk check`: the ledger's money invariants, then every receipt: its signature under a key the
// desk published, its readable copy, its row against what was signed, and each key's chain.
// Text read from the ledger is printed through printable, as verify-receipt prints file text.
import { ChainVerifier, openEnvelope, printable, type Receipt, ReceiptKeys } from "../receipt/index.ts";
import type { DeskLedger } from "./ports.ts";
import type { ReceiptRecord } from "./records.ts";

export type CheckReport = { ok: string[]; problems: string[] };

const CHECK_PAGE = 1000;

export async function checkLedger(ledger: Pick<DeskLedger, "check" | "records">): Promise<CheckReport> {
  const ok: string[] = [];
  const problems = await ledger.check.money();
  if (problems.length === 0) ok.push("for every key and period, spent = charges + open reservations");

  const keys = ReceiptKeys.fromJwks({ keys: (await ledger.records.signingKeys()).map((k) => k.publicJwk) });
  const chain = new ChainVerifier();
  let count = 0;
  const before = problems.length;
  // A page at a time: what the check holds is one page and each key's last link, whatever the ledger's size.
  for await (const page of ledger.check.receiptsInChainOrder(CHECK_PAGE)) {
    for (const row of page) {
      count++;
      const opened = openEnvelope(JSON.parse(row.envelope), keys);
      for (const c of opened.checks)
        if (!c.ok) problems.push(`receipt ${printable(row.id)} (key ${printable(row.keyId)} seq ${row.seq}): ${c.name} ${c.detail ?? ""}`.trim());
      const s = opened.signed;
      // Every column is read as if it were the receipt (org_id decides which keys may fetch it,
      // sha256 is what the next receipt chains to): each must be what was signed.
      if (s !== null && !rowMatches(row, s, opened.payloadSha256))
        problems.push(`receipt ${printable(row.id)}: the ledger row differs from the signed receipt`);
      chain.add(count, s, opened.payloadSha256);
    }
  }
  for (const f of chain.failures) problems.push(`chain of key ${f.key_id}: ${f.detail}`);
  if (problems.length === before) ok.push(`${count} receipts: signatures, readable copies and ${chain.keyCount} key chains intact`);
  return { ok, problems };
}

function rowMatches(row: ReceiptRecord, s: Receipt, payloadSha256: string | null): boolean {
  return (
    s.id === row.id &&
    s.org_id === row.orgId &&
    s.key_id === row.keyId &&
    s.seq === row.seq &&
    Date.parse(s.issued_at) === row.issuedAt &&
    s.tool === row.tool &&
    s.outcome === row.outcome &&
    s.period === row.period &&
    s.amount_mc === row.amountMc &&
    s.kid === row.kid &&
    payloadSha256 === row.sha256
  );
}
