// fetch to a peer the desk does not control (an upstream), bounded three ways: every exchange is
// cut at its deadline, body included; at most `maxExchanges` run at once, the rest waiting for a
// slot within their deadline; and at most `maxAnswerBytes` come back, whatever the peer
// declares. Without the cut, a call to an upstream that accepts and never answers (or dribbles)
// keeps its socket open for good, and enough of them fill the runtime's shared pool of 256
// connections, so that every other upstream's calls time out too. Any kind of upstream client
// uses it.
import { readAtMost } from "../http/body.ts";
import { Slots } from "./slots.ts";

export type Fetch = (url: string | URL, init?: RequestInit) => Promise<Response>;

export type FetchBounds = { timeoutMs: number; maxExchanges: number; maxAnswerBytes: number };

/** An answer past the byte bound: the exchange fails as a transport failure would. */
export class AnswerTooLarge extends Error {
  override name = "AnswerTooLarge";
}

/** A fetch with its own slots: one per peer, so one that stops answering cannot take the others' connections. */
export function boundedFetch(bounds: FetchBounds): Fetch {
  const slots = new Slots(bounds.maxExchanges);
  return async (url, init) => {
    const cut = new AbortController();
    let holding = false;
    let done = false;
    // Ends the exchange once: the timer goes and the slot returns.
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (holding) slots.release();
    };
    const timer = setTimeout(() => {
      cut.abort(new DOMException("the upstream timeout passed", "TimeoutError"));
      finish();
    }, bounds.timeoutMs);
    // Never what keeps the process alive (an event stream keeps it armed until the stream ends).
    timer.unref();
    let handedOff = false;
    try {
      await slots.acquire(cut.signal);
      holding = !done;
      if (done) slots.release();
      const res = await fetch(url, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, cut.signal]) : cut.signal });
      // An event stream stays under the deadline while it is read; a JSON answer is read here,
      // so the exchange ends now and does not hold its timer and slot for the whole timeout.
      if ((res.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream") && res.body !== null) {
        handedOff = true;
        let seen = 0;
        const body = res.body.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, stream) {
              seen += chunk.byteLength;
              if (seen > bounds.maxAnswerBytes) {
                finish();
                stream.error(new AnswerTooLarge());
                return;
              }
              stream.enqueue(chunk);
            },
            flush: finish,
            // The reader took what it needed and cancelled (a stream the server keeps open after its answer): the slot is back now.
            cancel: finish,
          } as Transformer<Uint8Array, Uint8Array>),
        );
        return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
      }
      const body = await readAnswer(res, bounds.maxAnswerBytes);
      return new Response(res.status === 204 || res.status === 304 ? null : body, { status: res.status, statusText: res.statusText, headers: res.headers });
    } finally {
      if (!handedOff) finish();
    }
  };
}

/** A whole answer's bytes, refused past `max` whatever it declares. */
async function readAnswer(res: Response, max: number): Promise<ArrayBuffer> {
  const declared = res.headers.get("content-length");
  // A declared length bounds what is read (HTTP framing): read it in one go when small enough.
  // Not for a compressed answer: fetch decompresses it, and its length tells only the wire size
  // (a few KB of gzip can hold gigabytes), so it is counted as it decompresses.
  const encoded = (res.headers.get("content-encoding") ?? "identity").toLowerCase() !== "identity";
  if (!encoded && declared !== null && /^\d{1,15}$/.test(declared)) {
    if (Number(declared) <= max) return res.arrayBuffer();
    await res.body?.cancel().catch(() => {});
    throw new AnswerTooLarge();
  }
  const bytes = await readAtMost(res.body, max);
  if (bytes === undefined) throw new AnswerTooLarge();
  return bytes.buffer as ArrayBuffer;
}
