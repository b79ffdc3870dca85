// Reading a body with a ceiling, both ways: a request the approver or the desk answers, and an
// answer serve-mcp or the desk's upstream client reads. A peer that lies about its length, or
// sends none (chunked), cannot make us buffer more than we allow; a request body must also be
// UTF-8 JSON, so what the desk hashes is exactly what the agent sent.
import { WireError } from "../errors.ts";

/**
 * The whole stream as bytes, or undefined as soon as it passes `max` bytes (the rest is
 * cancelled unread). No stream is no bytes. Errors of the stream propagate.
 */
export async function readAtMost(body: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array | undefined> {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

/** `application/json`, optionally with `charset=utf-8`; anything else is refused. */
export function isJsonContentType(value: string | null): boolean {
  if (value === null) return false;
  const [media, ...params] = value.split(";").map((p) => p.trim().toLowerCase());
  if (media !== "application/json") return false;
  return params.every((p) => p === "" || p === "charset=utf-8" || p === 'charset="utf-8"');
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/**
 * The request's body as a JSON value, or a WireError: CONTENT_TYPE_INVALID unless it is
 * `application/json` (charset, if any, utf-8); BODY_TOO_LARGE past `maxBytes`, declared or
 * counted; BODY_INVALID for a malformed Content-Length, a body cut off mid-way, bytes that are
 * not UTF-8 (never silently replaced: the desk hashes what it parsed) or text that is not JSON.
 */
export async function readJsonBody(req: Request, maxBytes: number): Promise<unknown> {
  if (!isJsonContentType(req.headers.get("content-type"))) throw new WireError("CONTENT_TYPE_INVALID");
  const declared = req.headers.get("content-length");
  if (declared !== null && !/^\d+$/.test(declared)) throw new WireError("BODY_INVALID");
  if (declared !== null && Number(declared) > maxBytes) throw new WireError("BODY_TOO_LARGE");
  let bytes: Uint8Array | undefined;
  try {
    // A declared length within the limit frames the body (no chunked coding): read it in one go,
    // which costs a fraction of iterating the stream. The size is still checked on what arrived.
    // Without one it is counted as it streams, so it cannot exhaust memory either.
    bytes = declared !== null && req.headers.get("transfer-encoding") === null ? new Uint8Array(await req.arrayBuffer()) : await readAtMost(req.body, maxBytes);
  } catch {
    // The client went away mid-body (or sent broken chunking): its fault, not a server fault.
    throw new WireError("BODY_INVALID");
  }
  if (bytes === undefined || bytes.byteLength > maxBytes) throw new WireError("BODY_TOO_LARGE");
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch {
    throw new WireError("BODY_INVALID");
  }
}

/** readJsonBody, and the value must be an object (BODY_INVALID otherwise). */
export async function readJsonObject(req: Request, maxBytes: number): Promise<Record<string, unknown>> {
  const value = await readJsonBody(req, maxBytes);
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new WireError("BODY_INVALID");
  return value as Record<string, unknown>;
}
