// Reading a body with a ceiling, on both ends of the ask link: a peer that lies about its
// length, or sends none (chunked), cannot make us buffer more than we allow.

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
