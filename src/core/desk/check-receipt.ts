// What `desk check` asks of each stored receipt on its own: its signature under a key the desk
// published, its readable copy, and its row against what was signed. Pure over a page of
// ledger rows, so it runs on any thread (adapters/threads); the chain across receipts is
// followed by the caller, in order, from the links answered here.
import { type OpenedEnvelope, openEnvelope, openStored, printable, type Receipt, type ReceiptKeys } from "../receipt/index.ts";
import type { ReceiptRecord, StoredReceiptRecord } from "./records.ts";

/** The signed fields a key's chain follows, and the SHA-256 of the payload bytes (what the next receipt's prev_sha256 holds). */
export type ChainLinkOf = Pick<Receipt, "key_id" | "seq" | "prev_sha256"> & { sha256: string };

/** One receipt checked: its chain link (null when the payload is unreadable: its problems say why) and what is wrong with it. */
export type CheckedReceipt = { link: ChainLinkOf | null; problems: string[] };

/**
 * A page checked, in a form cheap to hand from thread to thread. `problems`: what is wrong, each
 * with its receipt's place in the page, in page order. `prev`: each receipt's signed
 * prev_sha256; its chain link is the row's own key_id, seq and sha256 with it (the row was found
 * to be what was signed), unless `links` holds the receipt's place: then that link is its own
 * (null when the payload is unreadable).
 */
export type CheckedPage = {
  problems: [at: number, problem: string][];
  prev: (string | null)[];
  links: [at: number, link: ChainLinkOf | null][];
};

/** checkReceipt over a page, in its order. */
export function checkReceipts(rows: readonly StoredReceiptRecord[], keys: ReceiptKeys): CheckedPage {
  const page: CheckedPage = { problems: [], prev: [], links: [] };
  for (let at = 0; at < rows.length; at++) {
    const row = rows[at]!;
    const { link, problems } = checkReceipt(row, keys);
    for (const p of problems) page.problems.push([at, p]);
    if (link !== null && link.key_id === row.keyId && link.seq === row.seq && link.sha256 === row.sha256) {
      page.prev.push(link.prev_sha256);
    } else {
      page.prev.push(null);
      page.links.push([at, link]);
    }
  }
  return page;
}

/** The chain links of a page checked by checkReceipts, in the page's order (see CheckedPage). */
export function linksOf(rows: readonly Pick<StoredReceiptRecord, "keyId" | "seq" | "sha256">[], page: CheckedPage): (ChainLinkOf | null)[] {
  const links = rows.map((row, at): ChainLinkOf | null => ({ key_id: row.keyId, seq: row.seq, prev_sha256: page.prev[at]!, sha256: row.sha256 }));
  for (const [at, link] of page.links) links[at] = link;
  return links;
}

/** One ledger row: what was signed opened under `keys`, and every column held against the signed receipt. */
export function checkReceipt(row: StoredReceiptRecord, keys: ReceiptKeys): CheckedReceipt {
  const where = () => `receipt ${printable(row.id)} (key ${printable(row.keyId)} seq ${row.seq})`;
  let opened: OpenedEnvelope;
  if (row.envelope === null) {
    opened = openStored(row, keys);
  } else {
    let envelope: unknown;
    try {
      envelope = JSON.parse(row.envelope);
    } catch {
      return { link: null, problems: [`${where()}: envelope is not JSON`] };
    }
    opened = openEnvelope(envelope, keys);
  }
  const problems: string[] = [];
  for (const c of opened.checks) if (!c.ok) problems.push(`${where()}: ${c.name} ${c.detail ?? ""}`.trim());
  const s = opened.signed;
  // Every column is read as if it were the receipt (org_id decides which keys may fetch it,
  // sha256 is what the next receipt chains to): each must be what was signed.
  if (s !== null && !rowMatches(row, s, opened.payloadSha256)) problems.push(`receipt ${printable(row.id)}: the ledger row differs from the signed receipt`);
  const link = s === null || opened.payloadSha256 === null ? null : { key_id: s.key_id, seq: s.seq, prev_sha256: s.prev_sha256, sha256: opened.payloadSha256 };
  return { link, problems };
}

/** Whether every column of a receipt row is what was signed (desk check, and a migration converting old rows). */
export function rowMatches(row: Omit<ReceiptRecord, "envelope">, s: Receipt, payloadSha256: string | null): boolean {
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
