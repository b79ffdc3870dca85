// The card-number net: does a piece of text hold something that may be a payment card number?
// It runs on every string an agent sends (URLs and handles included), so that a card number
// pasted by mistake, or slipped in on purpose, is refused before it is stored, shown or sent on.
//
// The rule, exactly:
//  1. The text is normalised with NFKC (full-width, superscript and mathematical digits become
//     ASCII digits; compatibility spaces become spaces).
//  2. It is cut into pieces at every letter (Unicode category L). Letters end a digit run.
//  3. In each piece, every character that is not a decimal digit is ignored: spaces of any kind,
//     punctuation (. , - _ / : ; and the rest), symbols, emoji, controls, invisible format
//     characters (zero-width, bidi) and combining marks are all separators, however many.
//     Decimal digits of any script (Unicode Nd: Arabic-Indic, Devanagari, Thai, ...) count with
//     their numeric value.
//  4. The piece holds a card number when any 13 to 19 consecutive digits of it pass the Luhn
//     check. Windows inside a longer run count too, so padding a number with digits does not
//     hide it.
//  5. In the normalised text, a percent-encoded byte (`%` and two hex digits) is one separator,
//     its hex characters included: they neither join a run (the `20` of `%20`) nor end one (the
//     `D` of `%2D`).
//  6. If the normalised text holds a percent-encoded byte, it is decoded once (as UTF-8, bad
//     bytes become U+FFFD), normalised again and scanned by steps 2-4 (a `%` in the decoded text
//     is plain punctuation), so a number split by `%20` or written as `%34%31...` is caught.
// A false alarm is possible on long runs of unrelated numbers (about one window in ten passes
// Luhn); the caller refuses with CARD_NUMBER_REFUSED and never echoes the value.

const MIN_LEN = 13;
const MAX_LEN = 19;

const DIGIT = /\p{Nd}/u;
const LETTER = /\p{L}/u;
const PERCENT_ESCAPE = /%[0-9A-Fa-f]{2}/;

// Character classes: -1 separator, -2 letter (breaks a run), 0..9 digit value. Known up front
// for ASCII; found once for any other BMP code point and kept in a 64 KiB table.
const SEPARATOR = -1;
const BREAK = -2;
const UNKNOWN = -3;
const BMP_CLASS = new Int8Array(0x10000).fill(UNKNOWN);
BMP_CLASS.fill(SEPARATOR, 0, 128);
for (let c = 0x30; c <= 0x39; c++) BMP_CLASS[c] = c - 0x30;
for (let c = 0x41; c <= 0x5a; c++) BMP_CLASS[c] = BREAK;
for (let c = 0x61; c <= 0x7a; c++) BMP_CLASS[c] = BREAK;

// Unicode encodes every set of decimal digits as one contiguous 0..9 run, and where two sets
// touch, each maximal run of Nd code points is whole sets; so a digit's value is its distance
// from the start of its run, modulo 10.
function classifySlow(cp: number): number {
  const ch = String.fromCodePoint(cp);
  if (DIGIT.test(ch)) {
    let start = cp;
    while (start > 0 && DIGIT.test(String.fromCodePoint(start - 1))) start--;
    return (cp - start) % 10;
  }
  return LETTER.test(ch) ? BREAK : SEPARATOR;
}

// Astral digits (Adlam, Osmanya, ...) are cached too: there are a few hundred of them.
const astralDigits = new Map<number, number>();

function classify(cp: number): number {
  if (cp > 0xffff) {
    const known = astralDigits.get(cp);
    if (known !== undefined) return known;
    const cls = classifySlow(cp);
    if (cls >= 0) astralDigits.set(cp, cls);
    return cls;
  }
  let cls = BMP_CLASS[cp]!;
  if (cls === UNKNOWN) {
    cls = classifySlow(cp);
    BMP_CLASS[cp] = cls;
  }
  return cls;
}

// The last MAX_LEN digits of the current run, newest at ring[(count - 1) % MAX_LEN]. Shared:
// scan() is synchronous and never re-entered.
const ring = new Int8Array(MAX_LEN);

const isHex = (c: number): boolean => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);

/**
 * Scans one normalised string for a Luhn-valid 13-19 window. With `skipEscapes`, each `%XX`
 * escape is a separator.
 */
function scan(text: string, skipEscapes: boolean): boolean {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    let cp = text.charCodeAt(i);
    if (cp === 0x25 && skipEscapes && i + 2 < text.length && isHex(text.charCodeAt(i + 1)) && isHex(text.charCodeAt(i + 2))) {
      i += 2;
      continue;
    }
    if (cp >= 0xd800 && cp <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        i++;
      }
    }
    const cls = classify(cp);
    if (cls === SEPARATOR) continue;
    if (cls === BREAK) {
      count = 0;
      continue;
    }
    ring[count % MAX_LEN] = cls;
    count++;
    if (count >= MIN_LEN && windowEndingHerePasses(count)) return true;
  }
  return false;
}

// Luhn over the windows that end at the newest digit: walk left, doubling every second digit,
// and test the sum at each length from 13 to 19 that the run is long enough for.
function windowEndingHerePasses(count: number): boolean {
  const longest = Math.min(count, MAX_LEN);
  let sum = 0;
  for (let k = 0; k < longest; k++) {
    let d = ring[(count - 1 - k) % MAX_LEN]!;
    if (k & 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    if (k + 1 >= MIN_LEN && sum % 10 === 0) return true;
  }
  return false;
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

const utf8 = new TextDecoder("utf-8", { fatal: false });

/** Decodes every run of `%XX` escapes as UTF-8 (malformed bytes become U+FFFD). One level. */
function percentDecode(text: string): string {
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    const bytes = new Uint8Array(run.length / 3);
    for (let j = 0; j < bytes.length; j++) bytes[j] = Number.parseInt(run.slice(j * 3 + 1, j * 3 + 3), 16);
    return utf8.decode(bytes);
  });
}

const normalise = (text: string): string => (isAscii(text) ? text : text.normalize("NFKC"));

/** True when the text may hold a payment card number by the rule in this file's header. */
export function containsCardNumber(text: string): boolean {
  const normal = normalise(text);
  if (scan(normal, true)) return true;
  return PERCENT_ESCAPE.test(normal) && scan(normalise(percentDecode(normal)), false);
}

/** The Luhn check over a string of ASCII digits (for tests and callers that build numbers). */
export function luhnValid(digits: string): boolean {
  if (!/^[0-9]+$/.test(digits)) return false;
  let sum = 0;
  for (let k = 0; k < digits.length; k++) {
    let d = digits.charCodeAt(digits.length - 1 - k) - 0x30;
    if (k & 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}
