// `desk check`: the ledger's money invariants, the audit rows kept beside their receipts
// (audit-log.ts), then every receipt: its signature under a key the desk published, its readable
// copy, its row against what was signed (check-receipt.ts, on as many threads as the caller's
// checker has), and each key's chain, followed here in order.
// Text read from the ledger is printed through printable, as verify-receipt prints file text.
import { ChainVerifier, type Jwks, ReceiptKeys } from "../receipt/index.ts";
import { keptAuditProblem } from "./audit-log.ts";
import { type CheckedPage, checkReceipts, linksOf } from "./check-receipt.ts";
import type { DeskLedger, ReceiptPageChecker } from "./ports.ts";
import type { StoredReceiptRecord } from "./records.ts";

/**
 * `complete` is false when the check was stopped before the last receipt: `checked` says how far
 * it got, and the problems are those found so far. A report that is not complete is not a pass.
 */
export type CheckReport = { ok: string[]; problems: string[]; checked: number; complete: boolean };

export type CheckOptions = {
  /** Makes the page checker from the desk's published keys (default: on this thread, one page at a time). */
  checker?: (jwks: Jwks) => ReceiptPageChecker;
  /** Pages handed to the checker and not yet taken back, at most (default 1; a few per thread keeps them busy). */
  pagesInFlight?: number;
  /** Once aborted, no further page is read: the report says how far the check got. */
  signal?: AbortSignal;
  /** Sees the count of receipts checked, after each page. */
  onProgress?: (checked: number) => void;
};

const CHECK_PAGE = 1000;

/** A page handed to the checker: its rows (the chain links are read from them), and its answer to come. */
type Handed = { rows: StoredReceiptRecord[]; answer: Promise<CheckedPage> };

/** Checks on the calling thread. */
export function inThreadChecker(jwks: Jwks): ReceiptPageChecker {
  const keys = ReceiptKeys.fromJwks(jwks);
  return { check: async (page) => checkReceipts(page, keys), close: async () => {} };
}

export async function checkLedger(ledger: Pick<DeskLedger, "check" | "records">, options: CheckOptions = {}): Promise<CheckReport> {
  const { signal, onProgress } = options;
  const ok: string[] = [];
  const problems = await ledger.check.money();
  if (problems.length === 0) ok.push("for every key and period, spent = charges + open reservations");
  if (signal?.aborted !== true) {
    let kept = 0;
    const found = problems.length;
    for await (const page of ledger.check.keptAudit(CHECK_PAGE)) {
      kept += page.length;
      for (const row of page) {
        const problem = keptAuditProblem(row);
        if (problem !== null) problems.push(problem);
      }
    }
    if (kept > 0 && problems.length === found) ok.push(`${kept} audit rows kept beside their receipts say what the receipts derive`);
  }

  const jwks = { keys: (await ledger.records.signingKeys()).map((k) => k.publicJwk) };
  // Read here too, so a bad key set stops the check the same way whichever checker runs it.
  ReceiptKeys.fromJwks(jwks);
  const checker = (options.checker ?? inThreadChecker)(jwks);
  const inFlight = Math.max(1, options.pagesInFlight ?? 1);
  const chain = new ChainVerifier();
  let checked = 0;
  let complete = signal?.aborted !== true;
  const before = problems.length;
  const take = async ({ rows, answer }: Handed) => {
    const page = await answer;
    // No receipt is counted as checked without its own answer.
    if (page.prev.length !== rows.length) throw new Error(`a page of ${rows.length} receipts was answered for ${page.prev.length}`);
    for (const [, p] of page.problems) problems.push(p);
    for (const link of linksOf(rows, page)) chain.add(++checked, link, link?.sha256 ?? null);
    onProgress?.(checked);
  };
  // Pages are taken back in the order they were read, so each key's chain is followed in seq
  // order whichever thread answers first. What the check holds is the pages in flight and each
  // key's last link, whatever the ledger's size; a page is read only once one is taken back.
  const pending: Handed[] = [];
  try {
    if (complete) {
      for await (const page of ledger.check.receiptsInChainOrder(CHECK_PAGE)) {
        const answer = checker.check(page);
        // Awaited in turn below; a page rejected meanwhile is not an unhandled rejection.
        answer.catch(() => {});
        pending.push({ rows: page, answer });
        if (pending.length >= inFlight) await take(pending.shift()!);
        if (signal?.aborted) {
          complete = false;
          break;
        }
      }
    }
    // The pages already handed out are few: finish them, so `checked` counts whole pages.
    while (pending.length > 0) await take(pending.shift()!);
  } finally {
    await checker.close();
  }
  for (const f of chain.failures) problems.push(`chain of key ${f.key_id}: ${f.detail}`);
  if (complete && problems.length === before) ok.push(`${checked} receipts: signatures, readable copies and ${chain.keyCount} key chains intact`);
  return { ok, problems, checked, complete };
}
