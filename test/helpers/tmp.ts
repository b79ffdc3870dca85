import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh temporary directory, removed at the end of the `await using` scope. */
export function tempDir(prefix = "ask-only-test-"): { path: string } & AsyncDisposable & Disposable {
  const path = mkdtempSync(join(tmpdir(), prefix));
  const dispose = () => rmSync(path, { recursive: true, force: true });
  return { path, [Symbol.asyncDispose]: async () => dispose(), [Symbol.dispose]: dispose };
}
