// Millicents as a person reads them, for the desk's answers and its console alike: the exact
// figure in mc (1 cent = 1,000 mc) with a cents or dollars hint beside it. String arithmetic
// only, as for amounts (format.ts): a float would round a large budget in its last digits.

/** `1,234,567`: digits grouped by thousands. */
export function groupThousands(value: number): string {
  const digits = String(Math.abs(value)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return value < 0 ? `-${digits}` : digits;
}

/** `12,500 mc`. */
export function mc(value: number): string {
  return `${groupThousands(value)} mc`;
}

/** The exact decimal of `value / 10^places` for an integer value, grouped, trailing zeros dropped: `decimalOf(1234500, 3) === "1,234.5"`. */
function decimalOf(value: number, places: number): string {
  const digits = String(Math.abs(value)).padStart(places + 1, "0");
  const whole = groupThousands(Number(digits.slice(0, digits.length - places)));
  const fraction = digits.slice(digits.length - places).replace(/0+$/, "");
  return `${value < 0 ? "-" : ""}${whole}${fraction === "" ? "" : `.${fraction}`}`;
}

/** Cents in millicents, exactly: `centsOf(1500) === "1.5"`, `centsOf(1234500) === "1,234.5"`. */
export function centsOf(value: number): string {
  return decimalOf(value, 3);
}

/** `12.5¢` below a dollar, `$1.25` from a dollar up (never rounded: up to 5 decimals). */
export function hint(value: number): string {
  if (Math.abs(value) < 100_000) return `${centsOf(value)}¢`;
  return `$${decimalOf(value, 5)}`;
}

/** A non-negative whole number of mc typed by the operator, or null. */
export function parseMc(text: string): number | null {
  const clean = text.replace(/[\s,_]/g, "");
  if (!/^\d{1,16}$/.test(clean)) return null;
  const n = Number(clean);
  return Number.isSafeInteger(n) ? n : null;
}
