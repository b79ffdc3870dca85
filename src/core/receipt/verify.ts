// Offline verification of desk receipts, pure over a JWKS: the signature under its kid, the
// readable copy against the signed payload, the returned result and the arguments against
// their hashes, and each key's hash chain. Nothing here reads files or prints.
import { createPublicKey, type KeyObject, verify } from "node:crypto";
import { decodeBase64url } from "./base64url.ts";
import { CanonicalJsonError, canonicalJson } from "./canonical.ts";
import { hashJson, sha256Hex } from "./hash.ts";
import { MCP_RECEIPT_META_KEY, resultForHashing } from "./result.ts";
import { type Jwks, jwkThumbprint, ReceiptKeyError } from "./sign.ts";
import { canonicalReceipt, RECEIPT_FIELDS, type Receipt, receiptProblem } from "./types.ts";

export type CheckName = "envelope" | "signature" | "readable_copy" | "result" | "params";

/**
 * One verification step. `skipped` checks (nothing to check, e.g. no arguments given) carry
 * ok: true so that `checks.every((c) => c.ok)` is the verdict.
 */
export type Check = { name: CheckName; ok: boolean; detail?: string; skipped?: boolean };

/** A JWKS parsed once: kid -> Ed25519 public KeyObject. */
export class ReceiptKeys {
  private constructor(private readonly byKid: ReadonlyMap<string, KeyObject>) {}

  /** Reads a JWKS; throws ReceiptKeyError naming the first key that is not a public Ed25519 JWK. */
  static fromJwks(jwks: unknown): ReceiptKeys {
    const keys = (jwks as { keys?: unknown } | null)?.keys;
    if (typeof jwks !== "object" || !Array.isArray(keys)) throw new ReceiptKeyError('not a JWKS: expected {"keys": [...]}');
    const byKid = new Map<string, KeyObject>();
    keys.forEach((jwk: unknown, i) => {
      const k = jwk as Record<string, unknown> | null;
      const where = `keys[${i}]`;
      if (typeof k !== "object" || k === null) throw new ReceiptKeyError(`${where} is not an object`);
      // A verifier's key set must never hold a private key: it is handed around freely.
      if (Object.hasOwn(k, "d")) throw new ReceiptKeyError(`${where} holds private key material ("d")`);
      if (k.kty !== "OKP" || k.crv !== "Ed25519") throw new ReceiptKeyError(`${where} is not an Ed25519 (OKP) key`);
      if (k.use !== undefined && k.use !== "sig") throw new ReceiptKeyError(`${where} has use other than "sig"`);
      if (k.alg !== undefined && k.alg !== "EdDSA") throw new ReceiptKeyError(`${where} has alg other than "EdDSA"`);
      if (typeof k.x !== "string" || decodeBase64url(k.x)?.length !== 32) throw new ReceiptKeyError(`${where} has no valid "x"`);
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

/**
 * Text from the file (a kid, a field name, a key id) made safe to show on a terminal: anything
 * outside printable ASCII is escaped, so a crafted receipt cannot send control sequences or
 * reorder the line with bidi marks; long values are cut.
 */
export function printable(text: string): string {
  const cut = text.length > 80 ? `${text.slice(0, 80)}...` : text;
  return /^[\x20-\x7e]*$/.test(cut) ? cut : cut.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** One check as a line of output: `ok   signature (kid ...)`, `FAILED result: ...`, `skip params (...)`. */
export function describeCheck(check: Check): string {
  const label = check.name.replace("_", " ");
  if (check.skipped) return `skip ${label} (${check.detail ?? "not applicable"})`;
  if (check.ok) return check.detail ? `ok   ${label} (${check.detail})` : `ok   ${label}`;
  return `FAILED ${label}: ${check.detail ?? "failed"}`;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function canonicalOrNull(value: unknown): string | null {
  try {
    return canonicalJson(value);
  } catch (err) {
    if (err instanceof CanonicalJsonError) return null;
    throw err;
  }
}

function differingFields(readable: Record<string, unknown>, signed: Receipt): string[] {
  const names = new Set<string>([...RECEIPT_FIELDS, ...Object.keys(readable)]);
  const out: string[] = [];
  for (const name of names) {
    const a = Object.hasOwn(readable, name) ? canonicalOrNull(readable[name]) : undefined;
    const b = Object.hasOwn(signed, name) ? canonicalJson((signed as Record<string, unknown>)[name]) : undefined;
    if (a !== b || a === null) out.push(name);
  }
  return out;
}

/**
 * Checks one envelope: `signature` (Ed25519 under its kid in `keys`, over the payload bytes, which
 * must be the canonical JSON of a v1 receipt carrying that kid) and `readable_copy` (equal to
 * the payload, field by field). A malformed envelope gives one failed `envelope` check.
 */
export function openEnvelope(envelope: unknown, keys: ReceiptKeys | Jwks): OpenedEnvelope {
  const step = prepare(envelope, keysOf(keys));
  if ("opened" in step) return step.opened;
  return conclude(step, step.key !== undefined && step.sig !== null && verify(null, step.read.bytes, step.key, step.sig));
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
    verify(null, step.read.bytes, key, sig, (err, valid) => {
      if (err) reject(err);
      else resolve(conclude(step, valid));
    });
  });
}

type Prepared = {
  kid: string;
  receipt: unknown;
  read: ReadPayload;
  key: KeyObject | undefined;
  /** The 64 signature bytes, or null when the text is not one. */
  sig: Buffer | null;
};

function prepare(envelope: unknown, keySet: ReceiptKeys): Prepared | { opened: OpenedEnvelope } {
  if (!isRecord(envelope)) return { opened: broken("not a receipt envelope (expected an object)") };
  const { payload, signature, kid, receipt } = envelope;
  if (typeof payload !== "string" || typeof signature !== "string" || typeof kid !== "string") {
    return { opened: broken("not a receipt envelope (payload, signature and kid must be strings)") };
  }
  const read = readPayload(payload, receipt);
  if (read === null) return { opened: broken("payload is not base64url") };
  const sig = decodeBase64url(signature);
  return { kid, receipt, read, key: keySet.get(kid), sig: sig !== null && sig.length === 64 ? sig : null };
}

function conclude({ kid, receipt, read, key }: Prepared, signatureValid: boolean): OpenedEnvelope {
  const { bytes, signed, problem } = read;
  const checks: Check[] = [];
  if (!key) checks.push({ name: "signature", ok: false, detail: `unknown kid ${printable(kid)} (not in the key set)` });
  else if (!signatureValid) checks.push({ name: "signature", ok: false, detail: `does not verify under kid ${printable(kid)}` });
  else if (signed === null) checks.push({ name: "signature", ok: false, detail: problem ?? "the signed payload is unreadable" });
  else if (signed.kid !== kid) checks.push({ name: "signature", ok: false, detail: "the signed kid differs from the envelope kid" });
  else checks.push({ name: "signature", ok: true, detail: `kid ${kid}` });

  if (signed === null) {
    checks.push({ name: "readable_copy", ok: false, detail: "not checked: the signed payload is unreadable" });
  } else if (!isRecord(receipt)) {
    checks.push({ name: "readable_copy", ok: false, detail: "the envelope has no readable copy" });
  } else if (read.copyMatches) {
    checks.push({ name: "readable_copy", ok: true });
  } else {
    const fields = differingFields(receipt, signed).map(printable);
    checks.push({ name: "readable_copy", ok: false, detail: `differs from signed payload at ${fields.join(", ")}` });
  }
  return { checks, signed, payloadSha256: signed === null ? null : sha256Hex(bytes) };
}

type ReadPayload = {
  bytes: Buffer;
  /** The signed receipt, when the payload is the canonical JSON of a v1 receipt. */
  signed: Receipt | null;
  problem: string | null;
  /** The readable copy is exactly the signed receipt. */
  copyMatches: boolean;
};

/** Decodes a payload (null when it is not canonical base64url) and reads it as a receipt. */
function readPayload(payload: string, readable: unknown): ReadPayload | null {
  const bytes = decodeBase64url(payload);
  if (bytes === null) return null;
  const fail = (problem: string): ReadPayload => ({ bytes, signed: null, problem, copyMatches: false });
  let text: string;
  let parsed: unknown;
  try {
    text = utf8.decode(bytes);
  } catch {
    return fail("the signed payload is not UTF-8");
  }
  try {
    parsed = JSON.parse(text);
  } catch {
    return fail("the signed payload is not JSON");
  }
  const shape = receiptProblem(parsed);
  if (shape !== null) return fail(`the signed payload is not a v1 receipt (${shape})`);
  const signed = parsed as Receipt;
  // One byte form per receipt: blocks duplicate keys or re-spelled numbers that two JSON
  // readers could take differently while the signature still holds.
  if (canonicalReceipt(signed) !== text) return fail("the signed payload is not canonical JSON");
  return { bytes, signed, problem: null, copyMatches: isRecord(readable) && sameReceipt(readable, signed) };
}

// Every receipt field is a string, a number or null, so === per field is canonical equality.
function sameReceipt(readable: Record<string, unknown>, signed: Receipt): boolean {
  if (Object.keys(readable).length !== RECEIPT_FIELDS.length) return false;
  for (const field of RECEIPT_FIELDS) {
    if (!Object.hasOwn(readable, field) || readable[field] !== signed[field]) return false;
  }
  return true;
}

function broken(detail: string): OpenedEnvelope {
  return { checks: [{ name: "envelope", ok: false, detail }], signed: null, payloadSha256: null };
}

/** signature + readable_copy of one envelope (see openEnvelope). */
export function verifyEnvelope(envelope: unknown, keys: ReceiptKeys | Jwks): Check[] {
  return openEnvelope(envelope, keys).checks;
}

type Located =
  | { kind: "envelope"; envelope: unknown }
  | { kind: "rest"; envelope: unknown; result: unknown }
  | { kind: "refusal"; envelope: unknown }
  | { kind: "mcp"; envelope: unknown; result: unknown };

function locate(body: unknown): Located | null {
  if (!isRecord(body)) return null;
  // A whole JSON-RPC response saved from the wire: its `result` is the tools/call result.
  if (body.jsonrpc === "2.0" && isRecord(body.result) && isRecord(body.result._meta)) return locate(body.result);
  if (typeof body.payload === "string" && typeof body.signature === "string") return { kind: "envelope", envelope: body };
  const meta = body._meta;
  if (isRecord(meta) && Object.hasOwn(meta, MCP_RECEIPT_META_KEY)) {
    return { kind: "mcp", envelope: meta[MCP_RECEIPT_META_KEY], result: body };
  }
  if (Object.hasOwn(body, "receipt")) {
    return Object.hasOwn(body, "result")
      ? { kind: "rest", envelope: body.receipt, result: body.result }
      : { kind: "refusal", envelope: body.receipt };
  }
  return null;
}

function hashOrProblem(value: unknown): { hash: string } | { problem: string } {
  try {
    return { hash: hashJson(value) };
  } catch (err) {
    if (err instanceof CanonicalJsonError) return { problem: `no canonical JSON form (${err.problem} at ${err.path})` };
    throw err;
  }
}

function resultCheck(found: Located, signed: Receipt): Check {
  const expected = signed.result_sha256;
  if (found.kind === "envelope") {
    return { name: "result", ok: true, skipped: true, detail: "a bare envelope carries no result" };
  }
  if (found.kind === "refusal") {
    return expected === null
      ? { name: "result", ok: true, detail: `none returned, none paid for: ${signed.outcome}` }
      : { name: "result", ok: false, detail: "result_sha256 is set but the response holds no result" };
  }
  if (expected === null) {
    // An MCP refusal is itself a tool result (isError: true); a REST body with a result, or an
    // MCP answer that is not an error, under a receipt that binds no result is not a paid answer.
    if (found.kind === "mcp" && isRecord(found.result) && found.result.isError === true) {
      return { name: "result", ok: true, detail: `an error result, none paid for: ${signed.outcome}` };
    }
    return { name: "result", ok: false, detail: "the response holds a result but result_sha256 is null" };
  }
  const got = hashOrProblem(resultForHashing(found.result));
  if ("problem" in got) return { name: "result", ok: false, detail: `the result has ${got.problem}` };
  return got.hash === expected
    ? { name: "result", ok: true, detail: "matches result_sha256" }
    : { name: "result", ok: false, detail: "result_sha256 differs" };
}

function paramsCheck(args: unknown, signed: Receipt): Check {
  if (args === undefined) return { name: "params", ok: true, skipped: true, detail: "no arguments given" };
  const got = hashOrProblem(args);
  if ("problem" in got) return { name: "params", ok: false, detail: `the arguments have ${got.problem}` };
  return got.hash === signed.params_sha256
    ? { name: "params", ok: true, detail: "matches params_sha256" }
    : { name: "params", ok: false, detail: "params_sha256 differs" };
}

/**
 * Verifies a saved response: a desk REST body `{result, receipt}`, a refusal `{error, receipt}`,
 * an MCP tools/call result with the envelope at `_meta["io.ask-only/receipt"]` (alone, or as the
 * `result` of the JSON-RPC response that carried it), or a bare envelope. Checks, in order: signature, readable_copy, result, params (params is skipped when
 * `args` is undefined). result and params are compared with the SIGNED payload's hashes.
 */
export function verifyResponse(body: unknown, keys: ReceiptKeys | Jwks, args?: unknown): Check[] {
  const found = locate(body);
  if (found === null) {
    return [{ name: "envelope", ok: false, detail: `no receipt in the response (looked for receipt, _meta["${MCP_RECEIPT_META_KEY}"] and a bare envelope)` }];
  }
  const opened = openEnvelope(found.envelope, keys);
  if (opened.checks[0]?.name === "envelope") return opened.checks;
  const { checks, signed } = opened;
  if (signed === null) {
    const detail = "not checked: the signed payload is unreadable";
    return [...checks, { name: "result", ok: false, detail }, { name: "params", ok: false, detail }];
  }
  return [...checks, resultCheck(found, signed), paramsCheck(args, signed)];
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

  add(index: number, signed: Receipt | null, payloadSha256: string | null): void {
    if (signed === null || payloadSha256 === null) return;
    const key = signed.key_id;
    const prev = this.last.get(key);
    this.last.set(key, { seq: signed.seq, sha256: payloadSha256 });
    const expectedSeq = prev ? prev.seq + 1 : 1;
    if (signed.seq !== expectedSeq) {
      const what = prev ? `after seq ${prev.seq}` : "as the first receipt of the key";
      this.failures.push({ index, key_id: printable(key), detail: `seq ${signed.seq} ${what}; expected seq ${expectedSeq} (a receipt is missing or out of order)` });
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
    const read = isRecord(envelope) && typeof envelope.payload === "string" ? readPayload(envelope.payload, envelope.receipt) : null;
    chain.add(index, read?.signed ?? null, read?.signed ? sha256Hex(read.bytes) : null);
  });
  return { keys: chain.keyCount, failures: chain.failures };
}
