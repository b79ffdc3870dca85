// URLs in an ask (checkout_url, provider_url). They are parsed by the WHATWG URL parser and kept
// as the parser resolves them (`href`), so the URL the person is shown is byte for byte the URL
// passed on: no second parser can read the raw text differently. The site is the parsed
// hostname, which is ASCII (punycode) after parsing, so a look-alike host cannot pose as another.

export const MAX_URL_LENGTH = 2048;

export type UrlCheck = { ok: true; href: string; site: string } | { ok: false; code: "URL_INVALID" };

const INVALID: UrlCheck = { ok: false, code: "URL_INVALID" };

/** Unicode code points in a string (what the field rules call characters). */
export function codePointCount(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/**
 * An absolute `https:` URL of at most 2048 characters (the raw text, counted in code points, and
 * the resolved href), without `user:password@`, with a host.
 */
export function checkAskUrl(raw: unknown): UrlCheck {
  if (typeof raw !== "string") return INVALID;
  if (raw.length > MAX_URL_LENGTH && codePointCount(raw) > MAX_URL_LENGTH) return INVALID;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return INVALID;
  }
  // Plain http can be rewritten on the way; other schemes (javascript:, data:, file:) are not
  // places to pay or sign up.
  if (url.protocol !== "https:") return INVALID;
  // Credentials in a URL are a secret on display, and `https://shop.example@evil.example/`
  // reads as a different site than it is.
  if (url.username !== "" || url.password !== "") return INVALID;
  if (url.hostname === "") return INVALID;
  // Percent-encoding and punycode can make the href longer than the raw text.
  if (url.href.length > MAX_URL_LENGTH) return INVALID;
  return { ok: true, href: url.href, site: url.hostname };
}

/** The site of a stored href (one that passed checkAskUrl): its parsed hostname. */
export function siteOf(href: string): string {
  return new URL(href).hostname;
}
