// What a REST upstream's answer means for the clearing path: its status says who pays, and a
// success body becomes a tool result shaped as MCP's (so both kinds of upstream read alike).

/** What a status means: success, the input refused, the operator's credential refused, or the upstream failed. */
export type StatusMeaning = "ok" | "args_refused" | "auth_refused" | "upstream_error";

/** Statuses that blame the request's content, not the upstream: the agent's input was refused. */
const INPUT_REFUSED = new Set([400, 404, 409, 422]);

/**
 * 2xx → ok; 400, 404, 409, 422 → the input was refused; 401, 403 → the operator's credential
 * was refused; every other status (3xx — redirects are never followed —, 429, 5xx, the rest of
 * 4xx) → the upstream failed.
 */
export function meaningOf(status: number): StatusMeaning {
  if (status >= 200 && status <= 299) return "ok";
  if (INPUT_REFUSED.has(status)) return "args_refused";
  if (status === 401 || status === 403) return "auth_refused";
  return "upstream_error";
}

/** A JSON media type: `application/json` or any `+json` structured syntax suffix. */
export function isJsonMediaType(mediaType: string): boolean {
  const essence = mediaType.split(";")[0]!.trim().toLowerCase();
  return essence === "application/json" || /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+\+json$/.test(essence);
}

const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The tool result of a success answer, or null when the desk cannot carry it (then the call is an
 * upstream error):
 * - JSON (`application/json`, `*+json`): `structuredContent` is the answer when it is an object,
 *   else `{"value": answer}`; one text block holds `structuredContent` as JSON (MCP's advice for
 *   structured results). JSON that does not parse → null.
 * - An empty body (204, or no bytes): `{"content": []}`.
 * - `text/*` in valid UTF-8: one text block with the text, no `structuredContent`.
 * - Anything else (binary media types, invalid UTF-8) → null.
 */
export function resultOf(contentType: string | null, bytes: Uint8Array): Record<string, unknown> | null {
  if (bytes.byteLength === 0) return { content: [] };
  const mediaType = contentType ?? "";
  let text: string;
  try {
    text = fatalUtf8.decode(bytes);
  } catch {
    return null;
  }
  if (isJsonMediaType(mediaType)) {
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      return null;
    }
    const structured = typeof answer === "object" && answer !== null && !Array.isArray(answer) ? (answer as Record<string, unknown>) : { value: answer };
    return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured };
  }
  if (mediaType.split(";")[0]!.trim().toLowerCase().startsWith("text/")) return { content: [{ type: "text", text }] };
  return null;
}
