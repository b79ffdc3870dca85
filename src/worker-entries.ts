// The entry files of the worker threads, named beside main.ts on purpose: in the compiled binary
// every module shares main.ts's URL, and each entry is built at its path relative to src/
// (build.ts lists WORKER_ENTRIES), so a URL made from this file is right both from source and
// in the binary. The URL is absolute: an entry missing from the binary fails to start, it is
// never looked up in the working directory (where anyone could plant a file to run).
export const WORKER_ENTRIES = {
  receiptCheck: "./adapters/threads/receipt-check-worker.ts",
  receiptExport: "./adapters/sqlite/desk/export-worker.ts",
} as const;

export function workerUrl(name: keyof typeof WORKER_ENTRIES): URL {
  return new URL(WORKER_ENTRIES[name], import.meta.url);
}
