// SHA-256 in lowercase hex, over UTF-8 text or canonical JSON.
import { createHash } from "node:crypto";
import { canonicalJson } from "./canonical.ts";

/** Lowercase hex SHA-256 of the UTF-8 bytes of `text`. */
export function sha256Hex(text: string | Uint8Array): string {
  return createHash("sha256").update(text).digest("hex");
}

/** SHA-256 (hex) of the RFC 8785 form of `value`; throws CanonicalJsonError like canonicalJson. */
export function hashJson(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
