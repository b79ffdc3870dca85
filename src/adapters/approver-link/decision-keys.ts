// The approver's decision keys as the desk's operator pinned them: a JWKS file (`approver
// --print-decision-keys`), read at start and read again when a decision names a kid it lacks
// (the approver rotated its key and the operator updated the file). A decision signed by any
// key not in the file is never acted on.
import { readFileSync } from "node:fs";
import type { DecisionKeys } from "../../core/desk/ports.ts";
import { ReceiptKeys } from "../../core/receipt/verify.ts";

/** Reads `path` as a JWKS; throws (ReceiptKeyError, or the file's error) when it is none. */
export function readDecisionKeys(path: string): ReceiptKeys {
  return ReceiptKeys.fromJwks(JSON.parse(readFileSync(path, "utf8")));
}

export class FileDecisionKeys implements DecisionKeys {
  #keys: ReceiptKeys;

  constructor(
    private readonly path: string,
    keys: ReceiptKeys,
  ) {
    this.#keys = keys;
  }

  current(): ReceiptKeys {
    return this.#keys;
  }

  reload(): ReceiptKeys | null {
    try {
      this.#keys = readDecisionKeys(this.path);
      return this.#keys;
    } catch {
      return null;
    }
  }
}
