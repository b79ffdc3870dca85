// How many terminal columns a piece of recap text may take. The rule is deliberately coarse:
// printable ASCII (U+0020-U+007E) is one column, every other code point is two. No terminal
// draws a code point wider than two cells, so a line that fits by this rule fits on screen,
// whatever the font, the East Asian width tables or the emoji presentation say.

/** Columns of one code point. */
export const codePointWidth = (cp: number): 1 | 2 => (cp >= 0x20 && cp <= 0x7e ? 1 : 2);

/** Columns of a string, counted per code point (a lone surrogate counts as one code point). */
export function textWidth(text: string): number {
  let width = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x20 && unit <= 0x7e) {
      width += 1;
      continue;
    }
    width += 2;
    // A high surrogate followed by a low one is one code point: skip its second half.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
  }
  return width;
}
