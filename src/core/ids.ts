// Identifiers minted on our side: approval ids (serve-mcp mints them, never the agent) and the
// reference approver's demo refs. Both come from a CSPRNG so an agent cannot guess the id of
// another ask, and the checks here are what the ledger and the console accept.

import { containsCardNumber } from "./money/card-net.ts";

/** Crockford base32: digits and capitals without I, L, O and U (no 1/I/l or 0/O confusion). */
export const CROCKFORD_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

const APPROVAL_ID_LENGTH = 10;

const APPROVAL_ID = /^[0-9A-HJKMNP-TV-Z]{10}$/;

export type RandomBytes = (n: number) => Uint8Array;

const cryptoRandomBytes: RandomBytes = (n) => crypto.getRandomValues(new Uint8Array(n));

function draw(randomBytes: RandomBytes, n: number): Uint8Array {
  const bytes = randomBytes(n);
  if (!(bytes instanceof Uint8Array) || bytes.length < n) throw new RangeError(`the random source gave fewer than ${n} bytes`);
  return bytes;
}

/**
 * A new approval id: 10 Crockford base32 characters holding 50 random bits. The bits come from
 * 7 random bytes (48 bits from six, 2 from the seventh), so every id is equally likely: no
 * modulo bias.
 */
export function mintApprovalId(randomBytes: RandomBytes = cryptoRandomBytes): string {
  const b = draw(randomBytes, 7);
  // 50 bits stay below 2^53, so plain numbers hold them exactly.
  let value = 0;
  for (let i = 0; i < 6; i++) value = value * 256 + b[i]!;
  value = value * 4 + (b[6]! & 3);
  let id = "";
  for (let i = 0; i < APPROVAL_ID_LENGTH; i++) {
    id += CROCKFORD_ALPHABET[value % 32];
    value = Math.floor(value / 32);
  }
  return id;
}

/** Exactly 10 characters of the alphabet, uppercase; nothing else (no trimming, no mapping). */
export function isApprovalId(s: unknown): s is string {
  return typeof s === "string" && APPROVAL_ID.test(s);
}

/**
 * An id as a person types it on the console: surrounding spaces trimmed, any case. Returns the
 * canonical uppercase id, or undefined. Look-alikes (I, L, O) are refused, not mapped to 1 or 0,
 * so a typo never lands on another ask. Only ASCII is upper-cased: `ſ`.toUpperCase() is "S".
 */
export function normalizeApprovalIdInput(s: string): string | undefined {
  const t = s.trim();
  if (!/^[0-9A-Za-z]{10}$/.test(t)) return undefined;
  const upper = t.toUpperCase();
  return isApprovalId(upper) ? upper : undefined;
}

/** A reference approver's ref: `demo-` and 8 lowercase hex digits. It moves no money. */
export function mintDemoRef(randomBytes: RandomBytes = cryptoRandomBytes): string {
  const b = draw(randomBytes, 4);
  let hex = "";
  for (let i = 0; i < 4; i++) hex += b[i]!.toString(16).padStart(2, "0");
  return `demo-${hex}`;
}

const SAFE_REF = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A ref or an error code the agent may see: 1-64 of `A-Z a-z 0-9 _ -`, and no card number (a
 * payment backend's reference must not carry one back to the agent).
 */
export function isSafeRef(s: unknown): s is string {
  return typeof s === "string" && SAFE_REF.test(s) && !containsCardNumber(s);
}
