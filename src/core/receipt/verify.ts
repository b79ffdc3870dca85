// Offline verification of desk receipts, pure over a JWKS: the signature under its kid, the
// readable copy against the signed payload, the returned result and the arguments against
// their hashes, and each key's hash chain. Nothing here reads files or prints.
import { createPublicKey, type KeyObject, verify } from "node:crypto";
import { decodeBase64url } from "./base64url.ts";
import {
  type Check,
  envelopeParts,
  hashCheck,
  isRecord,
  jwkProblem,
  paramsCheck,
  printable,
  readableCheck,
  readSigned,
  resultCheck,
  shapeOf,
  signatureCheck,
  type ToHash,
  unreadable,
} from "./checks.ts";
import { approvalChecks } from "../decision/verify.ts";
import { sha256Hex } from "./hash.ts";
import { type Jwks, jwkThumbprint, ReceiptKeyError } from "./sign.ts";
import { envelopeText, readableCopyOf, type SignedReceipt } from "./stored.ts";
import type { Receipt } from "./types.ts";

export { type Check, type CheckName, printable, readShape, type Shape, SHAPES_READ } from "./checks.ts";

/** A JWKS parsed once: kid -> Ed25519 public KeyObject. */
export class ReceiptKeys {
  private constructor(private readonly byKid: ReadonlyMap<string, KeyObject>) {}

  /** Reads a JWKS; throws ReceiptKeyError naming the first key that is not a public Ed25519 JWK. */
  static fromJwks(jwks: unknown): ReceiptKeys {
    const keys = (jwks as { keys?: unknown } | null)?.keys;
    if (typeof jwks !== "object" || !Array.isArray(keys)) throw new ReceiptKeyError('not a JWKS: expected {"keys": [...]}');
    const byKid = new Map<string, KeyObject>();
    keys.forEach((jwk: unknown, i) => {
      const where = `keys[${i}]`;
      const problem = jwkProblem(jwk, decodeBase64url);
      if (problem !== null) throw new ReceiptKeyError(`${where} ${problem}`);
      const k = jwk as { x: string; kid: unknown };
      // kid is the key's own thumbprint, so a kid cannot be pinned to a different key.
      if (k.kid !== jwkThumbprint(k.x)) throw new ReceiptKeyError(`${where} has a kid that is not its RFC 7638 thumbprint`);
      if (byKid.has(k.kid)) throw new ReceiptKeyError(`${where} repeats kid ${k.kid}`);
      byKid.set(k.kid, createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: k.x }, format: "jwk" }));
    });
    return new ReceiptKeys(byKid);
  }

  get(kid: string): KeyObject | undefined {
    return this.byKid.get(kid);
  }

  get kids(): string[] {
    return [...this.byKid.keys()];
  }
}

const loaded = new WeakMap<object, ReceiptKeys>();

function keysOf(keys: ReceiptKeys | Jwks): ReceiptKeys {
  if (keys instanceof ReceiptKeys) return keys;
  let found = loaded.get(keys);
  if (!found) {
    found = ReceiptKeys.fromJwks(keys);
    loaded.set(keys, found);
  }
  return found;
}

/** An envelope opened: its checks so far, and the signed receipt when the payload is one. */
export type OpenedEnvelope = {
  checks: Check[];
  /** The receipt as signed (from the payload), or null when the payload is not a v1 receipt. */
  signed: Receipt | null;
  /** SHA-256 hex of the payload bytes (what the next receipt's prev_sha256 must be), or null. */
  payloadSha256: string | null;
};

/** One check as a line of output: `ok   signature (kid ...)`, `FAILED result: ...`, `skip params (...)`. */
export function describeCheck(check: Check): string {
  const label = check.name.replace("_", " ");
  if (check.skipped) return `skip ${label} (${check.detail ?? "not applicable"})`;
  if (check.ok) return check.detail ? `ok   ${label} (${check.detail})` : `ok   ${label}`;
  return `FAILED ${label}: ${check.detail ?? "failed"}`;
}

/**
 * Checks one envelope: `signature` (Ed25519 under its kid in `keys`, over the payload bytes, which
 * must be the canonical JSON of a v1 receipt carrying that kid) and `readable_copy` (equal to
 * the payload, field by field). A malformed envelope gives one failed `envelope` check.
 */
export function openEnvelope(envelope: unknown, keys: ReceiptKeys | Jwks): OpenedEnvelope {
  const step = prepare(envelope, keysOf(keys));
  if ("opened" in step) return step.opened;
  return conclude(step, step.key !== undefined && step.sig !== null && verify(null, step.bytes, step.key, step.sig));
}

/**
 * openEnvelope with the Ed25519 check on the runtime's crypto thread pool, so a long export
 * verifies on every core: keep many in flight (the CLI keeps a window of them).
 */
export function openEnvelopeAsync(envelope: unknown, keys: ReceiptKeys | Jwks): Promise<OpenedEnvelope> {
  const step = prepare(envelope, keysOf(keys));
  if ("opened" in step) return Promise.resolve(step.opened);
  const { key, sig } = step;
  if (key === undefined || sig === null) return Promise.resolve(conclude(step, false));
  return new Promise((resolve, reject) => {
    verify(null, step.bytes, key, sig, (err, valid) => {
      if (err) reject(err);
      else resolve(conclude(step, valid));
    });
  });
}

/**
 * openEnvelope for a receipt as a ledger stores it (stored.ts), without writing out the envelope
 * it answers and reading it back: that envelope is made from the payload's own kid and readable
 * copy, so the same checks run over the payload bytes. A payload that does not read as a receipt
 * is opened through that envelope (the rare case, and every detail stays the same); one that is
 * not JSON has no envelope: its signature check fails.
 */
export function openStored(stored: SignedReceipt, keys: ReceiptKeys): OpenedEnvelope {
  const bytes = Buffer.from(stored.payload, "utf8");
  const read = readSigned(bytes);
  if ("problem" in read) {
    let envelope: unknown;
    try {
      envelope = JSON.parse(envelopeText(stored));
    } catch {
      return { checks: [{ name: "signature", ok: false, detail: read.problem }, unreadable("readable_copy")], signed: null, payloadSha256: null };
    }
    return openEnvelope(envelope, keys);
  }
  const kid = read.signed.kid;
  const key = keys.get(kid);
  const sig = stored.signature.length === 64 ? stored.signature : null;
  return conclude(
    { kid, receipt: readableCopyOf(read.signed), bytes, read, key, sig: sig === null ? null : Buffer.from(sig) },
    key !== undefined && sig !== null && verify(null, bytes, key, sig),
  );
}

/**
 * One line of a JSONL export, which must be a bare envelope and nothing else (shapes.ts): any
 * other shape gives one failed `shape` check; an envelope is opened as openEnvelopeAsync does.
 */
export function openExportLine(value: unknown, keys: ReceiptKeys | Jwks): Promise<OpenedEnvelope> {
  const found = shapeOf(value);
  if ("shape" in found && found.shape.kind === "envelope") return openEnvelopeAsync(value, keys);
  const failed: Check =
    "failed" in found
      ? found.failed
      : { name: "shape", ok: false, detail: `an export line is a bare envelope {payload, signature, kid, receipt}, not a ${found.shape.kind} response` };
  return Promise.resolve({ checks: [failed], signed: null, payloadSha256: null });
}

type Prepared = {
  kid: string;
  receipt: unknown;
  bytes: Buffer;
  read: { signed: Receipt } | { problem: string };
  key: KeyObject | undefined;
  /** The 64 signature bytes, or null when the text is not one. */
  sig: Buffer | null;
};

function prepare(envelope: unknown, keySet: ReceiptKeys): Prepared | { opened: OpenedEnvelope } {
  const parts = envelopeParts(envelope);
  if ("failed" in parts) return { opened: { checks: [parts.failed], signed: null, payloadSha256: null } };
  const bytes = decodeBase64url(parts.payload);
  if (bytes === null) return { opened: { checks: [{ name: "envelope", ok: false, detail: "payload is not base64url" }], signed: null, payloadSha256: null } };
  const sig = decodeBase64url(parts.signature);
  return {
    kid: parts.kid,
    receipt: parts.receipt,
    bytes,
    read: readSigned(bytes),
    key: keySet.get(parts.kid),
    sig: sig !== null && sig.length === 64 ? sig : null,
  };
}

function conclude({ kid, receipt, bytes, read, key }: Prepared, signatureValid: boolean): OpenedEnvelope {
  const checks = [signatureCheck(kid, key !== undefined, signatureValid, read)];
  if ("problem" in read) return { checks: [...checks, unreadable("readable_copy")], signed: null, payloadSha256: null };
  checks.push(readableCheck(receipt, read.signed));
  return { checks, signed: read.signed, payloadSha256: sha256Hex(bytes) };
}

/** signature + readable_copy of one envelope (see openEnvelope). */
export function verifyEnvelope(envelope: unknown, keys: ReceiptKeys | Jwks): Check[] {
  return openEnvelope(envelope, keys).checks;
}

const hashed = (step: Check | ToHash): Check => ("text" in step ? hashCheck(step, sha256Hex(step.text)) : step);

/**
 * Verifies a saved response of one of the shapes in shapes.ts (REST body, refusal, MCP
 * tools/call result, the JSON-RPC response that carried it, bare envelope); any other file gives
 * one failed `shape` check. Checks, in order: signature, readable_copy, result, params (params is
 * skipped when `args` is undefined, result only for a bare envelope of a charged call), and for a
 * receipt that carries the approver's decision (version 2) approver_signature and approval,
 * under `approverKeys`. result and params are compared with the SIGNED payload's hashes.
 */
export function verifyResponse(body: unknown, keys: ReceiptKeys | Jwks, args?: unknown, approverKeys?: ReceiptKeys | Jwks): Check[] {
  const found = shapeOf(body);
  if ("failed" in found) return [found.failed];
  const opened = openEnvelope(found.shape.envelope, keys);
  if (opened.checks[0]?.name === "envelope") return opened.checks;
  const { checks, signed } = opened;
  if (signed === null) return [...checks, unreadable("result"), unreadable("params")];
  const approval = approvalChecks(signed, approverKeys === undefined ? undefined : keysOf(approverKeys));
  return [...checks, hashed(resultCheck(found.shape, signed)), hashed(paramsCheck(args, signed)), ...approval];
}

/** One break in a key's chain; `index` is the position in the list given to the verifier. */
export type ChainFailure = { index: number; key_id: string; detail: string };

/**
 * Follows each key's chain through receipts given in export order: seq starts at 1 and goes up
 * by one, and prev_sha256 is the SHA-256 of the previous payload bytes, so a deleted, inserted,
 * reordered or altered receipt shows at the next receipt of its key. (Deleting a key's latest
 * receipts leaves no trace in the file itself.) Receipts whose payload is unreadable are skipped
 * here; their own checks fail.
 */
export class ChainVerifier {
  private readonly last = new Map<string, { seq: number; sha256: string }>();
  readonly failures: ChainFailure[] = [];

  /** `signed`: the receipt as signed, or just the fields its chain follows. */
  add(index: number, signed: Pick<Receipt, "key_id" | "seq" | "prev_sha256"> | null, payloadSha256: string | null): void {
    if (signed === null || payloadSha256 === null) return;
    const key = signed.key_id;
    const prev = this.last.get(key);
    this.last.set(key, { seq: signed.seq, sha256: payloadSha256 });
    const expectedSeq = prev ? prev.seq + 1 : 1;
    if (signed.seq !== expectedSeq) {
      const what = prev ? `after seq ${prev.seq}` : "as the first receipt of the key";
      this.failures.push({
        index,
        key_id: printable(key),
        detail: `seq ${signed.seq} ${what}; expected seq ${expectedSeq} (a receipt is missing or out of order)`,
      });
    } else if (prev && signed.prev_sha256 !== prev.sha256) {
      this.failures.push({ index, key_id: printable(key), detail: `prev_sha256 differs from the hash of seq ${prev.seq}` });
    }
  }

  /** How many keys' chains were seen. */
  get keyCount(): number {
    return this.last.size;
  }
}

/** Chain check over envelopes in export order (see ChainVerifier); signatures are not checked here. */
export function verifyChain(envelopes: readonly unknown[]): { keys: number; failures: ChainFailure[] } {
  const chain = new ChainVerifier();
  envelopes.forEach((envelope, index) => {
    const bytes = isRecord(envelope) && typeof envelope.payload === "string" ? decodeBase64url(envelope.payload) : null;
    const read = bytes === null ? null : readSigned(bytes);
    chain.add(index, read !== null && "signed" in read ? read.signed : null, read !== null && "signed" in read ? sha256Hex(bytes!) : null);
  });
  return { keys: chain.keyCount, failures: chain.failures };
}
