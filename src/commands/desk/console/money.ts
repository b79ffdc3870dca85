// Amounts are integer millicents (1 cent = 1,000 mc) on the wire; the console shows the exact
// figure in mc with a cents or dollars hint beside it.

const grouped = new Intl.NumberFormat("en-US");

/** `12,500 mc`. */
export function mc(value: number): string {
  return `${grouped.format(value)} mc`;
}

/** `12.5¢` below a dollar, `$1.25` from a dollar up (never rounded away: up to 5 decimals). */
export function hint(value: number): string {
  if (Math.abs(value) < 100_000) return `${trim((value / 1000).toFixed(3))}¢`;
  return `$${trim((value / 100_000).toFixed(5))}`;
}

function trim(text: string): string {
  return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
}

/** A non-negative whole number of mc typed by the operator, or null. */
export function parseMc(text: string): number | null {
  const clean = text.replace(/[\s,_]/g, "");
  if (!/^\d{1,16}$/.test(clean)) return null;
  const n = Number(clean);
  return Number.isSafeInteger(n) ? n : null;
}
