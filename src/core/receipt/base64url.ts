// Strict base64url (RFC 4648 section 5, no padding): one text per byte string, so an envelope
// cannot be re-spelled (padding, stray characters, non-zero spare bits) and still pass.

const ALPHABET = /^[A-Za-z0-9_-]*$/;

export function encodeBase64url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64url");
}

/** The bytes of `text`, or null when it is not the one canonical unpadded base64url spelling. */
export function decodeBase64url(text: string): Buffer | null {
  if (text.length % 4 === 1 || !ALPHABET.test(text)) return null;
  const bytes = Buffer.from(text, "base64url");
  return bytes.toString("base64url") === text ? bytes : null;
}
