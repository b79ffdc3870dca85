// An OpenAPI document fetched once from the operator's `openapi_url` at registration (and at
// refresh): one GET, bounded in time and size, no redirect followed (the operator is told to
// give the final URL), JSON only. The document is then checked like one given inline.
import { readAtMost } from "../../core/http/body.ts";
import { DocumentRefused } from "../../core/rest/refused.ts";

/** A document larger than this is refused (inline documents are bounded by the 1 MiB request body). */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

/** The parsed JSON at `url`; throws DocumentRefused saying why it could not be had. */
export async function fetchDocument(url: URL, timeoutMs: number): Promise<unknown> {
  if (url.protocol !== "https:" && url.protocol !== "http:") throw new DocumentRefused(["openapi_url is not an http or https URL"]);
  const signal = AbortSignal.timeout(timeoutMs);
  let bytes: Uint8Array | undefined;
  try {
    const res = await fetch(url, { redirect: "manual", signal, headers: { accept: "application/json" } });
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => {});
      throw new DocumentRefused([`openapi_url answered a redirect (${res.status}): give the URL it points to`]);
    }
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => {});
      throw new DocumentRefused([`openapi_url answered HTTP ${res.status}`]);
    }
    bytes = await readAtMost(res.body, MAX_DOCUMENT_BYTES);
  } catch (err) {
    if (err instanceof DocumentRefused) throw err;
    throw new DocumentRefused([signal.aborted ? `openapi_url did not answer within ${timeoutMs} ms` : "openapi_url could not be fetched"], true);
  }
  if (bytes === undefined) throw new DocumentRefused([`the document at openapi_url is over ${MAX_DOCUMENT_BYTES} bytes`]);
  try {
    return JSON.parse(fatalUtf8.decode(bytes));
  } catch {
    throw new DocumentRefused(["the document at openapi_url is not JSON in UTF-8"]);
  }
}
