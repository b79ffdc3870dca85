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
const MAX_MARKS_PER_BASE = 2;

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
const HIDDEN = /^[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}]$/u;
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

// Escapes already written, by code point: a hostile reason is mostly escapes, and building each
// one again costs more than the rest of its row.
const ESCAPES = new Map<number, string>();

/** `\u{hex}` for one code point: lowercase hex, no padding. */
export function escapeCodePoint(cp: number): string {
  let escaped = ESCAPES.get(cp);
  if (escaped === undefined) {
    escaped = `\\u{${cp.toString(16)}}`;
    if (ESCAPES.size < 4096) ESCAPES.set(cp, escaped);
  }
  return escaped;
}

/** Receives the display text of a value piece by piece (see `scan`). */
type DisplaySink = {
  /** `text.slice(start, end)` is shown as it is: one character with its marks, or a URL's `%XX`. */
  verbatim(start: number, end: number, width: number): void;
  /** A piece the sanitiser wrote: an escape, or the one space that stands for a run of spaces. */
  generated(piece: string, width: number): void;
};

const isHex = (unit: number): boolean => (unit >= 0x30 && unit <= 0x39) || (unit >= 0x41 && unit <= 0x46) || (unit >= 0x61 && unit <= 0x66);

/**
 * The one walk over agent text that applies the rules at the top of this file. Each call to the
 * sink is an atom that a line break may never split: a character with its (at most two)
 * combining marks, an escape, a space, or (with `percentAtoms`, for URLs) a `%XX`.
 */
function scan(text: string, sink: DisplaySink, percentAtoms: boolean): void {
  const n = text.length;
  let spacePending = false;
  let shown = false;
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
      continue;
    }
    if (spacePending) {
      // Runs of spaces (NBSP, ideographic space, ...) become one ASCII space: blocks a wall of
      // blanks that pushes agent text to where a person expects a new row; leading ones dropped.
      if (shown) sink.generated(" ", 1);
      spacePending = false;
    }
    shown = true;
    if (cls !== PRINT) {
      // ESCAPE, or a combining mark that reached here: marks on a base were taken with it below,
      // so this one is a third or later on one base (a stack that draws over the rows around
      // it) or has no visible base (it would sit on a label, a space or the `>` marker).
      const escaped = escapeCodePoint(cp);
      sink.generated(escaped, escaped.length);
      continue;
    }
    if (percentAtoms && cp === 0x25 && i + 1 < n && isHex(text.charCodeAt(i)) && isHex(text.charCodeAt(i + 1))) {
      // A URL's `%XX` stays whole, so a cut never makes `%2` + `0` read as other text. A mark
      // after it has no base and is escaped on the next turn.
      sink.verbatim(start, i + 2, 3);
      i += 2;
      continue;
    }
    // Take up to two combining marks with their base, so a cut never strands one; each mark
    // counts two columns by the width rule.
    let width = cp < 0x80 ? 1 : 2;
    for (let marks = 0; marks < MAX_MARKS_PER_BASE && i < n; marks++) {
      let next = text.charCodeAt(i);
      let size = 1;
      if (next >= 0xd800 && next <= 0xdbff && i + 1 < n) {
        const low = text.charCodeAt(i + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          next = 0x10000 + ((next - 0xd800) << 10) + (low - 0xdc00);
          size = 2;
        }
      }
      if ((next < 0x80 ? CLASS[next]! : classOf(next)) !== MARK) break;
      i += size;
      width += 2;
    }
    sink.verbatim(start, i, width);
  }
}

/**
 * Display text cut into atoms that a line break may never split. `widths[i]` is the columns
 * of `atoms[i]` by the rule in width.ts.
 */
export type Atoms = { atoms: string[]; widths: number[] };

/** Agent text -> atoms of safe display text (see the rules at the top of this file). */
export function sanitizeAtoms(text: string, percentAtoms = false): Atoms {
  const atoms: string[] = [];
  const widths: number[] = [];
  scan(
    text,
    {
      verbatim: (start, end, width) => {
        atoms.push(text.slice(start, end));
        widths.push(width);
      },
      generated: (piece, width) => {
        atoms.push(piece);
        widths.push(width);
      },
    },
    percentAtoms,
  );
  return { atoms, widths };
}

// Builds rows from the walk, copying runs of verbatim text in one slice each (rendering is
// mostly string building: per-atom concatenation would cost more than the rules themselves).
class RowBuilder implements DisplaySink {
  readonly rows: string[] = [];
  private row = "";
  private runStart = 0;
  private runEnd = 0;
  private room: number;
  private placed = false;
  private endsWithSpace = false;

  constructor(
    private readonly text: string,
    firstRoom: number,
    private readonly nextRoom: number,
  ) {
    this.room = firstRoom;
  }

  private flush(): void {
    if (this.runEnd > this.runStart) this.row += this.text.slice(this.runStart, this.runEnd);
    this.runStart = this.runEnd;
  }

  private make(width: number): void {
    if (width <= this.room) return;
    if (!this.placed) throw new RangeError("row too narrow for one character of the value");
    this.flush();
    if (this.endsWithSpace) {
      // A space never ends a row (it would be invisible there): it moves to the start of the
      // next row, where it shows, so `ab cd` and `abcd` never look the same when cut.
      this.rows.push(this.row.slice(0, -1));
      this.row = " ";
      this.room = this.nextRoom - 1;
    } else {
      this.rows.push(this.row);
      this.row = "";
      this.room = this.nextRoom;
      this.placed = false;
    }
    this.endsWithSpace = false;
  }

  verbatim(start: number, end: number, width: number): void {
    this.make(width);
    if (start !== this.runEnd) {
      this.flush();
      this.runStart = start;
    }
    this.runEnd = end;
    this.room -= width;
    this.placed = true;
    this.endsWithSpace = false;
  }

  generated(piece: string, width: number): void {
    this.make(width);
    this.flush();
    this.row += piece;
    this.room -= width;
    this.placed = true;
    this.endsWithSpace = piece === " ";
  }

  finish(): string[] {
    this.flush();
    if (this.placed) this.rows.push(this.row);
    return this.rows;
  }
}

/**
 * Agent text -> the rows of its safe display: the first at most `firstRoom` columns, the others
 * at most `nextRoom`. No atom is split, and the rows joined give the whole display text back.
 * An empty display is no rows.
 */
export function displayRows(text: string, firstRoom: number, nextRoom: number, percentAtoms = false): string[] {
  const builder = new RowBuilder(text, firstRoom, nextRoom);
  scan(text, builder, percentAtoms);
  return builder.finish();
}

/** Agent text -> safe display text, as one string. */
export const sanitize = (text: string): string => displayRows(text, Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY).join("");
