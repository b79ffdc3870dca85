// Agent key secrets, the admin token and identifiers. Secrets are stored only as SHA-256 hashes;
// every comparison of secret material goes through `constantTimeEqual`.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

const KEY_SECRET_PREFIX = "cd_live_";
/** Characters of the random part used to find the key row; the rest stays secret. */
const LOOKUP_CHARS = 12;
const SECRET_SHAPE = /^cd_live_[A-Za-z0-9_-]{43}$/;

export type RandomSource = (bytes: number) => Uint8Array;
const systemRandom: RandomSource = (n) => new Uint8Array(randomBytes(n));

export function sha256(data: string | Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha256").update(data).digest());
}

/** The token of an `Authorization: Bearer <token>` header value (visible ASCII only), or null. */
export function bearerOf(header: string | null): string | null {
  const m = /^Bearer ([\x21-\x7e]+)$/.exec(header ?? "");
  return m ? m[1]! : null;
}

/** Constant-time equality of two byte strings (a length mismatch is not secret: hashes). */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

export type NewKeySecret = { secret: string; lookup: string; hash: Uint8Array };

/** `cd_live_` + 32 random bytes in base64url (43 characters). */
export function newKeySecret(random: RandomSource = systemRandom): NewKeySecret {
  const secret = KEY_SECRET_PREFIX + Buffer.from(random(32)).toString("base64url");
  return { secret, lookup: lookupOf(secret)!, hash: sha256(secret) };
}

/** The row-finding prefix of a well-formed secret, or null for anything else. */
export function lookupOf(secret: string): string | null {
  return SECRET_SHAPE.test(secret) ? secret.slice(KEY_SECRET_PREFIX.length, KEY_SECRET_PREFIX.length + LOOKUP_CHARS) : null;
}

const CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz";

/** `prefix_` + 16 Crockford base32 characters (80 random bits). */
export function newId(prefix: string, random: RandomSource = systemRandom): string {
  const bytes = random(10);
  let bits = 0;
  let value = 0;
  let out = "";
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += CROCKFORD[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return `${prefix}_${out}`;
}

/** A generated admin token: 32 random bytes, base64url (43 characters). */
export function newAdminToken(random: RandomSource = systemRandom): string {
  return Buffer.from(random(32)).toString("base64url");
}
