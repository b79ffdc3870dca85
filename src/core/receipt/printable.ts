// Text taken from a file a verifier reads (a kid, a field name, a key id, a JSON path), made safe
// to print: the recap's own escaping (core/recap/sanitize.ts), so a crafted receipt cannot send
// terminal controls (ESC sequences that clear or redraw the screen, fake `ok` lines), reorder a
// line with bidi controls or hide text in invisible characters. Pure, so the console bundles it.
import { displayRows } from "../recap/sanitize.ts";

/** Display columns of file text shown in one place before it is cut with `...`. */
const MAX_COLUMNS = 80;

/** Printable ASCII but space and backslash: what the recap shows as it is, one column each. */
const PLAIN = /^[!-[\]-~]*$/;

/** `text` escaped as the recap escapes agent text, and cut after `maxColumns` (80) columns. */
export function printable(text: string, maxColumns = MAX_COLUMNS): string {
  // The usual case (a kid, a receipt id, a field name): nothing to escape, collapse or cut.
  if (text.length <= maxColumns && PLAIN.test(text)) return text;
  const rows = displayRows(text, maxColumns, Number.POSITIVE_INFINITY);
  return rows.length > 1 ? `${rows[0]}...` : (rows[0] ?? "");
}
