// The regular-expression engine behind input-schema `pattern`s (and `patternProperties`,
// `propertyNames`' patterns): RE2 (the pure-JS port `re2js`), which matches in time linear in
// the input. The backtracking engine of JavaScript takes exponential time on patterns such as
// `^(a+)+$`, and a schema comes from an upstream while the string comes from an agent: one key's
// arguments would hold the event loop, and every other caller, for seconds a call.
//
// A pattern is ECMA-262 (what JSON Schema specifies); RE2's syntax and a few meanings differ, so
// the pattern is first checked as ECMA-262, then rewritten where the two engines disagree
// (`.`, `\s`, `\S`, `[\b]`, surrogate-pair escapes, `\p{Script=…}`), then compiled by RE2. What
// RE2 cannot run in linear time (backreferences, lookaround, repeats over 1,000) is refused.
import { RE2JS } from "re2js";

/** A pattern that cannot run on the linear-time engine; `why` is our text, never the pattern's. */
export class PatternRefused extends Error {
  override name = "PatternRefused";
  constructor(readonly why: string) {
    super(why);
  }
}

/** What ECMA-262's `\s` matches (WhiteSpace and LineTerminator); RE2's `\s` is ASCII only. */
export const JS_SPACE_RANGES: readonly (readonly [number, number])[] = [
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
];

const hex = (cp: number) => `\\x{${cp.toString(16)}}`;
const rangeText = (ranges: readonly (readonly [number, number])[]) => ranges.map(([a, b]) => (a === b ? hex(a) : `${hex(a)}-${hex(b)}`)).join("");
const complement = (ranges: readonly (readonly [number, number])[]) => {
  const out: [number, number][] = [];
  let next = 0;
  for (const [a, b] of ranges) {
    if (a > next) out.push([next, a - 1]);
    next = b + 1;
  }
  out.push([next, 0x10ffff]);
  return out;
};
const SPACE = rangeText(JS_SPACE_RANGES);
/** `\S` inside a class, where a negated class cannot nest: the complement spelled out. */
const NOT_SPACE = rangeText(complement(JS_SPACE_RANGES));
/** ECMA-262's `.` (without the s flag): anything but a line terminator; RE2's excludes only \n. */
const DOT = "[^\\x{a}\\x{d}\\x{2028}\\x{2029}]";

/** An ECMA-262 pattern (as Ajv compiles it, with the u flag) in RE2 syntax with the same meaning. */
export function toRe2Syntax(pattern: string): string {
  try {
    new RegExp(pattern, "u");
  } catch {
    throw new PatternRefused("not an ECMA-262 regular expression");
  }
  let out = "";
  let inClass = false;
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i]!;
    if (c === "\\") {
      const n = pattern[i + 1]!;
      const pair = /^\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})/i.exec(pattern.slice(i));
      if (pair) {
        // One code point written as its UTF-16 halves: RE2 would read two lone surrogates.
        const cp = 0x10000 + ((Number.parseInt(pair[1]!, 16) - 0xd800) << 10) + (Number.parseInt(pair[2]!, 16) - 0xdc00);
        out += hex(cp);
        i += 12;
        continue;
      }
      if (n === "k" || (n >= "1" && n <= "9")) throw new PatternRefused("a backreference needs a backtracking engine");
      if (n === "s" || n === "S") {
        out += inClass ? (n === "s" ? SPACE : NOT_SPACE) : n === "s" ? `[${SPACE}]` : `[^${SPACE}]`;
        i += 2;
        continue;
      }
      if (n === "b" && inClass) {
        out += "\\x{8}";
        i += 2;
        continue;
      }
      if ((n === "p" || n === "P") && pattern[i + 2] === "{") {
        const end = pattern.indexOf("}", i);
        const body = pattern.slice(i + 3, end);
        // ECMA-262 names a script `Script=Greek` (or `sc=`), a category `gc=Lu` or `Lu`; RE2 takes the bare value.
        const value = /^(?:Script|sc|General_Category|gc)=(.+)$/.exec(body)?.[1] ?? body;
        out += `\\${n}{${value}}`;
        i = end + 1;
        continue;
      }
      out += c + n;
      i += 2;
      continue;
    }
    if (inClass) {
      if (c === "]") inClass = false;
      // A literal `[` in a class; RE2 would read `[:alpha:]` as a POSIX class.
      out += c === "[" ? "\\[" : c;
      i++;
      continue;
    }
    if (/^\(\?<?[=!]/.test(pattern.slice(i, i + 4))) throw new PatternRefused("a lookaround needs a backtracking engine");
    // In ECMA-262 `[]` matches nothing and `[^]` anything; in RE2 a `]` there would be literal.
    if (pattern.startsWith("[]", i) || pattern.startsWith("[^]", i)) {
      out += pattern[i + 1] === "]" ? "[^\\x{0}-\\x{10ffff}]" : "[\\x{0}-\\x{10ffff}]";
      i += pattern[i + 1] === "]" ? 2 : 3;
      continue;
    }
    if (c === "[") inClass = true;
    out += c === "." ? DOT : c;
    i++;
  }
  return RE2JS.translateRegExp(out);
}

/** A compiled pattern as Ajv uses it: `test` (unanchored, like RegExp) and a key per pattern. */
class LinearPattern {
  private readonly re: RE2JS;
  constructor(private readonly source: string) {
    try {
      this.re = RE2JS.compile(toRe2Syntax(source));
    } catch (err) {
      if (err instanceof PatternRefused) throw err;
      // RE2's own words for what it refuses (e.g. "invalid or unsupported Perl syntax"), not the pattern.
      const what = typeof (err as { error?: unknown }).error === "string" ? (err as { error: string }).error : "refused";
      throw new PatternRefused(`the linear-time engine cannot run it (${what})`);
    }
  }
  test(s: string): boolean {
    return this.re.test(s);
  }
  /** Ajv keeps one compiled pattern per distinct toString(): it must differ per pattern. */
  toString(): string {
    return `re2:/${this.source}/u`;
  }
}

/** Ajv's `code.regExp` engine: compiles each schema pattern once, with RE2. */
export const linearRegExp = Object.assign((pattern: string, _flags: string) => new LinearPattern(pattern), {
  code: "linearRegExp",
});
