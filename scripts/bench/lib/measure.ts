// What the benchmarks share: reading a child process's first announcement, and quantiles.

/**
 * Reads `stream` until `re` matches and returns its first group (a listening URL), then drains the
 * rest so the child never blocks on a full pipe.
 */
export async function firstLine(stream: ReadableStream<Uint8Array>, re: RegExp): Promise<string> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`no ${re} in: ${text}`);
    text += decoder.decode(value, { stream: true });
    const m = re.exec(text);
    if (m) {
      reader.releaseLock();
      stream.pipeTo(new WritableStream()).catch(() => {});
      return m[1]!;
    }
  }
}

/** The q-quantile (0..1) of `xs`, by the nearest rank below. */
export function quantile(xs: readonly number[], q: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
