// The card-number net: does a piece of text hold something that may be a payment card number?
// It runs on every string an agent sends (URLs and handles included), so that a card number
// pasted by mistake, or slipped in on purpose, is refused before it is stored, shown or sent on.
//
// The rule, exactly (SPEC.md section 4 says it for users):
//  1. Every character has a class from Unicode's data (card-net-table.ts, generated from the
//     pinned Unicode version by scripts/unicode/card-net-table.ts): a digit 0-9, a word letter,
//     a separator, or a transparent separator. A character with a compatibility decomposition
//     reads as that decomposition (as NFKC would make it), unless it is a number character.
//  2. Digits: every number character (Nd, No, Nl) whose value is a whole number 0-9 is that
//     digit, in any script (Ethiopic, Kharoshthi, dingbat and double circled digits,
//     superscripts...); one whose name says which digit it is (TIBETAN DIGIT HALF TWO, COUNTING
//     ROD TENS DIGIT TWO) is that digit; an enclosed number (NEGATIVE CIRCLED NUMBER ELEVEN)
//     writes the digits of its value.
//  3. Word letters are the visible letters that do not look like punctuation or space. Default
//     ignorable letters (the Hangul fillers), modifier letters (Lm: ー ـ ʼ ː) and letters whose
//     UTS #39 prototype is punctuation, a symbol, a space or such a letter (ꓸ ꞌ ᐧ 一 ㅡ) are
//     transparent, as marks and format characters are; everything else is a separator, white
//     space (White_Space) being one kind of separator.
//  4. A word letter ends a run of digits, unless it stands alone between digits: when, looking
//     past transparent characters and separators other than white space, the nearest character
//     on each side is a digit, the letter is one more separator. So `4111ж1111ж1111ж1111` and
//     `4111-ж-1111-ж-1111-ж-1111` are one run each; `4111 ж 1111` and `4111жи1111` are two.
//     Two kinds of letter always end a run: ASCII letters (and what folds to them), which stand
//     between digits in ordinary machine text (hex, UUIDs, ISO 8601 times), and letters of
//     scripts written without spaces (Line_Break ID, CJ, H2, H3: ideographs, kana, Hangul
//     syllables), each a word by itself.
//  5. A run holds a card number when any 13 to 19 consecutive digits of it pass the Luhn check.
//     Windows inside a longer run count too, so padding a number with digits does not hide it.
//  6. A percent-encoded byte (a `%` and two hex digits, each as read in step 1) is one separator,
//     its hex characters included: they neither join a run (the `20` of `%20`) nor end one (the
//     `D` of `%2D`).
//  7. If the text holds a percent-encoded byte, it is decoded once (as UTF-8, bad bytes become
//     U+FFFD) and scanned again by steps 1-5 (a `%` in the decoded text is plain punctuation),
//     so a number split by `%20` or written as `%34%31...` is caught.
// A false alarm is possible on long runs of unrelated numbers (about one window in ten passes
// Luhn); the caller refuses with CARD_NUMBER_REFUSED and never echoes the value.
import { CARD_NET_HEX, CARD_NET_PERCENT, CARD_NET_RUNS, CARD_NET_SEQUENCES, CLASS } from "./card-net-table.ts";

const MIN_LEN = 13;
const MAX_LEN = 19;
const { SEPARATOR, SPACE, TRANSPARENT, WORD, WHOLE_WORD, SEQUENCE } = CLASS;

type Tables = {
  classOf: Uint8Array; // one class per code point
  sequences: Map<number, Uint8Array>; // the classes a SEQUENCE code point reads as
  hexOf: Map<number, number>; // non-ASCII code points that read as a hex digit, and its value
  percent: Set<number>; // code points that read as "%"
};

let tables: Tables | undefined;

/** Expands the generated table on first use (a megabyte, about a millisecond). */
function load(): Tables {
  if (tables) return tables;
  const classOf = new Uint8Array(0x110000);
  const runs = CARD_NET_RUNS;
  for (let i = 0; i < runs.length; i += 2) {
    const from = runs[i]!;
    const cls = runs[i + 1]!;
    const to = i + 2 < runs.length ? runs[i + 2]! : 0x110000;
    if (cls <= 9) for (let cp = from, d = cls; cp < to; cp++, d++) classOf[cp] = d;
    else classOf.fill(cls, from, to);
  }
  const sequences = new Map<number, Uint8Array>();
  for (let i = 0; i < CARD_NET_SEQUENCES.length; i += 2 + CARD_NET_SEQUENCES[i + 1]!) {
    sequences.set(CARD_NET_SEQUENCES[i]!, Uint8Array.from(CARD_NET_SEQUENCES.slice(i + 2, i + 2 + CARD_NET_SEQUENCES[i + 1]!)));
  }
  const hexOf = new Map<number, number>();
  for (let i = 0; i < CARD_NET_HEX.length; i += 2) hexOf.set(CARD_NET_HEX[i]!, CARD_NET_HEX[i + 1]!);
  tables = { classOf, sequences, hexOf, percent: new Set(CARD_NET_PERCENT) };
  return tables;
}

function hexValue(t: Tables, cp: number): number {
  if (cp >= 0x30 && cp <= 0x39) return cp - 0x30;
  if (cp >= 0x41 && cp <= 0x46) return cp - 0x37;
  if (cp >= 0x61 && cp <= 0x66) return cp - 0x57;
  return cp < 0x80 ? -1 : (t.hexOf.get(cp) ?? -1);
}

const width = (cp: number): number => (cp > 0xffff ? 2 : 1);

/** The byte of a percent escape starting at `i`, and where it ends; undefined when there is none. */
function escapeAt(t: Tables, text: string, i: number): { byte: number; end: number } | undefined {
  const pct = text.codePointAt(i)!;
  if (pct !== 0x25 && (pct < 0x80 || !t.percent.has(pct))) return undefined;
  const j = i + width(pct);
  if (j >= text.length) return undefined;
  const a = text.codePointAt(j)!;
  const high = hexValue(t, a);
  if (high < 0) return undefined;
  const k = j + width(a);
  if (k >= text.length) return undefined;
  const b = text.codePointAt(k)!;
  const low = hexValue(t, b);
  if (low < 0) return undefined;
  return { byte: high * 16 + low, end: k + width(b) };
}

// The scan's state. Shared: scan() is synchronous and never re-entered.
// The last MAX_LEN digits of the current run, newest at ring[(count - 1) % MAX_LEN].
const ring = new Int8Array(MAX_LEN);
let count = 0;
// The nearest digit, word letter or white space so far (transparent characters and other
// separators are looked past), and whether a word letter after a digit awaits its right side.
const NONE = 0;
const AFTER_DIGIT = 1;
const AFTER_WORD = 2;
let last = NONE;
let pendingLetter = false;

/** Feeds one class to the scan; true when a Luhn-valid window now ends at the newest digit. */
function feed(cls: number): boolean {
  if (cls <= 9) {
    pendingLetter = false; // a letter between two digits stood alone: a separator
    last = AFTER_DIGIT;
    ring[count % MAX_LEN] = cls;
    count++;
    return count >= MIN_LEN && windowEndingHerePasses();
  }
  if (cls === WORD) {
    if (last === AFTER_DIGIT) {
      pendingLetter = true;
    } else {
      pendingLetter = false; // this letter, and one waiting before it, belong to a word
      count = 0;
    }
    last = AFTER_WORD;
  } else if (cls === WHOLE_WORD) {
    pendingLetter = false;
    count = 0;
    last = AFTER_WORD;
  } else if (cls === SPACE) {
    if (pendingLetter) count = 0; // a letter with white space beside it is a word
    pendingLetter = false;
    last = NONE;
  }
  return false;
}

/** Scans one string for a Luhn-valid 13-19 window. With `skipEscapes`, each `%XX` is a separator. */
function scan(t: Tables, text: string, skipEscapes: boolean): { found: boolean; sawEscape: boolean } {
  const classOf = t.classOf;
  count = 0;
  last = NONE;
  pendingLetter = false;
  let sawEscape = false;
  for (let i = 0; i < text.length; ) {
    let cp = text.charCodeAt(i);
    if (cp >= 0xd800 && cp <= 0xdbff) cp = text.codePointAt(i)!;
    const cls = classOf[cp]!;
    if (cls === SEPARATOR) {
      // Every character read as "%" is a separator: only here can an escape begin.
      const byte = skipEscapes && (cp === 0x25 || (cp >= 0x80 && t.percent.has(cp))) ? escapeAt(t, text, i) : undefined;
      sawEscape ||= byte !== undefined;
      i = byte ? byte.end : i + width(cp);
      continue;
    }
    i += cp > 0xffff ? 2 : 1;
    if (cls === TRANSPARENT) continue;
    // The two commonest classes after separators, handled here rather than in feed().
    if (cls === WHOLE_WORD) {
      pendingLetter = false;
      count = 0;
      last = AFTER_WORD;
    } else if (cls === SPACE) {
      if (pendingLetter) count = 0;
      pendingLetter = false;
      last = NONE;
    } else if (cls === SEQUENCE) {
      for (const c of t.sequences.get(cp)!) if (feed(c)) return { found: true, sawEscape };
    } else if (feed(cls)) {
      return { found: true, sawEscape };
    }
  }
  return { found: false, sawEscape };
}

// Luhn over the windows that end at the newest digit: walk left, doubling every second digit,
// and test the sum at each length from 13 to 19 that the run is long enough for.
function windowEndingHerePasses(): boolean {
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

const utf8 = new TextDecoder("utf-8", { fatal: false });

/** Decodes every run of percent escapes as UTF-8 (malformed bytes become U+FFFD). One level. */
function percentDecode(t: Tables, text: string): string {
  let out = "";
  const bytes: number[] = [];
  for (let i = 0; i < text.length; ) {
    const found = escapeAt(t, text, i);
    if (found) {
      bytes.push(found.byte);
      i = found.end;
      continue;
    }
    if (bytes.length > 0) {
      out += utf8.decode(Uint8Array.from(bytes));
      bytes.length = 0;
    }
    const cp = text.codePointAt(i)!;
    out += text.slice(i, i + width(cp));
    i += width(cp);
  }
  if (bytes.length > 0) out += utf8.decode(Uint8Array.from(bytes));
  return out;
}

/** True when the text may hold a payment card number by the rule in this file's header. */
export function containsCardNumber(text: string): boolean {
  const t = load();
  const first = scan(t, text, true);
  if (first.found) return true;
  return first.sawEscape && scan(t, percentDecode(t, text), false).found;
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
