// Sealing of upstream credential headers with AES-256-GCM (WebCrypto). The additional data is
// the upstream's name, so a sealed blob copied onto another upstream row fails to open instead
// of sending one server's credential to another.

export type SealingKey = CryptoKey;

export async function importSealingKey(raw: Uint8Array): Promise<SealingKey> {
  if (raw.length !== 32) throw new Error("the sealing key must be 32 bytes");
  return crypto.subtle.importKey("raw", new Uint8Array(raw), { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
}

/** base64url(12-byte IV || ciphertext || 16-byte tag). */
export async function seal(key: SealingKey, aad: string, plaintext: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = await crypto.subtle.encrypt({ name: "AES-GCM", iv, additionalData: new TextEncoder().encode(aad) }, key, new TextEncoder().encode(plaintext));
  const out = new Uint8Array(12 + ct.byteLength);
  out.set(iv);
  out.set(new Uint8Array(ct), 12);
  return Buffer.from(out).toString("base64url");
}

/** Throws when the blob was altered or sealed for another name. */
export async function unseal(key: SealingKey, aad: string, sealed: string): Promise<string> {
  const bytes = Buffer.from(sealed, "base64url");
  const pt = await crypto.subtle.decrypt(
    { name: "AES-GCM", iv: bytes.subarray(0, 12), additionalData: new TextEncoder().encode(aad) },
    key,
    bytes.subarray(12),
  );
  return new TextDecoder().decode(pt);
}
