// Durations typed by a person on the command line: a whole number and one unit, `90s`, `10m`,
// `1h`. No fractions, signs or bare numbers, so `--ttl 10` cannot mean ten milliseconds by
// mistake.

const UNIT_MS = { s: 1_000, m: 60_000, h: 3_600_000 } as const;

/** The longest duration accepted: a week (a longer wait is a typo, not an intent). */
const MAX_DURATION_MS = 7 * 24 * 3_600_000;

/** Milliseconds for `90s` / `10m` / `1h`; undefined when the text is not such a duration. */
export function parseDuration(text: string): number | undefined {
  const m = /^([1-9][0-9]{0,6})(s|m|h)$/.exec(text);
  if (!m) return undefined;
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return ms <= MAX_DURATION_MS ? ms : undefined;
}

/** A short human form for start-up lines: `10m`, `90s`, `1h`. */
export function formatDuration(ms: number): string {
  if (ms % UNIT_MS.h === 0) return `${ms / UNIT_MS.h}h`;
  if (ms % UNIT_MS.m === 0) return `${ms / UNIT_MS.m}m`;
  return `${Math.ceil(ms / UNIT_MS.s)}s`;
}
