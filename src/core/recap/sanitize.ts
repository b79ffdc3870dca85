// Agent text -> text that is safe to put in front of a person who decides about money.
//
// Every code point falls in one of four classes:
//   PRINT   shown as itself (printable ASCII, letters, CJK, emoji, symbols, ...)
//   SPACE   any Unicode space separator (Zs): a run of them becomes one ASCII space
//   MARK    a combining mark (M): shown on its base, at most two per base
//   ESCAPE  shown as `\u{hex}` (lowercase hex, no padding)
// The classes come from the running engine's Unicode data, computed once per code point and
// kept in a table, so a recap never runs a regular expression per character after warm-up.
//
// Leading and trailing spaces are dropped: they are invisible at the end of a line and would
// only shift the text after a label. A value of nothing but spaces shows as nothing.

const PRINT = 1;
const SPACE = 2;
const MARK = 3;
const ESCAPE = 4;

/** At most this many combining marks are shown on one base; further ones are escaped. */
export const MAX_MARKS_PER_BASE = 2;

// Escaped, by threat:
// - Cc: C0 and C1 controls, DEL: a newline or ESC sequence could start a fake recap line, move
//   the cursor, clear the screen or recolour the real text.
// - Cf: format characters: bidi controls and isolates (U+202A-202E, U+2066-2069) reorder what
//   the person reads; zero-width spaces and joiners (U+200B-200D, U+2060, U+FEFF) hide inside
//   words; tag characters (U+E0000-E007F) carry invisible text; soft hyphen, invisible operators.
// - Zl, Zp: line and paragraph separators break lines in some terminals.
// - Cs: lone surrogates are no character at all; terminals draw them as anything or nothing.
// - Co: private-use code points are drawn from whatever font is installed (logos, look-alikes).
// - Cn: unassigned code points (and noncharacters) have no agreed glyph or width today.
// - Default_Ignorable_Code_Point: drawn as nothing by design: Hangul fillers, variation
//   selectors (U+FE00-FE0F, U+E0100-E01EF), the combining grapheme joiner, Khmer inherent vowels.
// - Variation_Selector: listed again so the rule holds if an engine's ignorable table differs.
const HIDDEN =
  /^[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}]$/u;
const SPACE_SEPARATOR = /^\p{Zs}$/u;
const COMBINING_MARK = /^\p{M}$/u;

const ALSO_ESCAPED: ReadonlySet<number> = new Set([
  // Hangul fillers: blank glyphs that look like spaces but are letters (also default-ignorable).
  0x115f, 0x1160, 0x3164, 0xffa0,
  // Blank symbols: the braille blank and the musical null notehead draw nothing at all.
  0x2800, 0x1d159,
  // Look-alikes of the backslash, so nothing but a real escape reads as `\u{...}`.
  0x2216, 0x29f5, 0x29f9, 0xfe68, 0xff3c,
]);

// One byte per code point, 0 = not classified yet. 1.1 MB, filled lazily: classifying the whole
// range up front would cost ~60 ms at every start of the binary.
const CLASS = new Uint8Array(0x110000);
for (let cp = 0; cp < 0x80; cp++) CLASS[cp] = cp >= 0x21 && cp <= 0x7e ? PRINT : ESCAPE;
CLASS[0x20] = SPACE;
// A literal backslash is escaped, so every `\` on screen begins a real escape.
CLASS[0x5c] = ESCAPE;

function classify(cp: number): number {
  const ch = String.fromCodePoint(cp);
  if (ALSO_ESCAPED.has(cp) || HIDDEN.test(ch)) return ESCAPE;
  if (SPACE_SEPARATOR.test(ch)) return SPACE;
  if (COMBINING_MARK.test(ch)) return MARK;
  return PRINT;
}

const classOf = (cp: number): number => {
  const known = CLASS[cp]!;
  if (known !== 0) return known;
  const found = classify(cp);
  CLASS[cp] = found;
  return found;
};

/** `\u{hex}` for one code point: lowercase hex, no padding. */
export const escapeCodePoint = (cp: number): string => `\\u{${cp.toString(16)}}`;

/**
 * Display text cut into atoms that a line break may never split: one character with its (at
 * most two) combining marks, one escape, or one space. `widths[i]` is the columns of
 * `atoms[i]` by the rule in width.ts.
 */
export type Atoms = { atoms: string[]; widths: number[] };

/** Agent text -> atoms of safe display text (see the rules at the top of this file). */
export function sanitizeAtoms(text: string): Atoms {
  const atoms: string[] = [];
  const widths: number[] = [];
  let spacePending = false;
  // The atom that combining marks may join (-1: none: start, space or escape), and how many it has.
  let base = -1;
  let marks = 0;
  const n = text.length;
  let i = 0;
  while (i < n) {
    const start = i;
    let cp = text.charCodeAt(i++);
    if (cp >= 0xd800 && cp <= 0xdbff && i < n) {
      const low = text.charCodeAt(i);
      if (low >= 0xdc00 && low <= 0xdfff) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        i++;
      }
    }
    const cls = cp < 0x80 ? CLASS[cp]! : classOf(cp);
    if (cls === SPACE) {
      spacePending = true;
      base = -1;
      continue;
    }
    if (spacePending) {
      // Runs of spaces (NBSP, ideographic space, ...) become one ASCII space: blocks a wall of
      // blanks that pushes agent text to where a person expects a new line; leading ones dropped.
      if (atoms.length > 0) {
        atoms.push(" ");
        widths.push(1);
      }
      spacePending = false;
    }
    if (cls === PRINT) {
      atoms.push(i - start === 1 ? text[start]! : text.slice(start, i));
      widths.push(cp < 0x80 ? 1 : 2);
      base = atoms.length - 1;
      marks = 0;
    } else if (cls === MARK && base >= 0 && marks < MAX_MARKS_PER_BASE) {
      // A mark stays on its base so a line break never strands it; each counts two columns.
      atoms[base] += text.slice(start, i);
      widths[base]! += 2;
      marks++;
    } else {
      // ESCAPE, or a mark beyond two on one base (a stack that draws over the lines around it),
      // or a mark with no visible base (it would sit on a label, a space or the `>` marker).
      const escaped = escapeCodePoint(cp);
      atoms.push(escaped);
      widths.push(escaped.length);
      base = -1;
    }
  }
  return { atoms, widths };
}

/** Agent text -> safe display text, as one string. */
export const sanitize = (text: string): string => sanitizeAtoms(text).atoms.join("");
