// One thread of ThreadedReceiptChecker: takes the key set once, then checks each page it is
// handed (checkReceipts) and answers it by id.
import { checkReceipts } from "../../core/desk/check-receipt.ts";
import { ReceiptKeys } from "../../core/receipt/index.ts";
import type { FromThread, ToThread } from "./receipt-checker.ts";

declare const self: Worker;

let keys: ReceiptKeys | null = null;
let pages = 0;
/** Pages between two collections on this thread. */
const WORKER_GC_EVERY = 2;

self.onmessage = (e: MessageEvent<ToThread>) => {
  const m = e.data;
  if (m.op === "keys") {
    keys = ReceiptKeys.fromJwks(m.jwks);
    return;
  }
  let answer: FromThread;
  try {
    if (keys === null) throw new Error("no key set");
    answer = { id: m.id, checked: checkReceipts(m.page, keys) };
  } catch (err) {
    answer = { id: m.id, error: err instanceof Error ? `${err.name}: ${err.message}` : "error" };
  }
  self.postMessage(answer);
  // Bounded memory: left to its own pace, the thread's heap of pages already answered grows to
  // hundreds of MB before it is collected (see RECEIPT_CHECK_GC_EVERY in receipt-checker.ts).
  if (++pages % WORKER_GC_EVERY === 0) Bun.gc(true);
};
