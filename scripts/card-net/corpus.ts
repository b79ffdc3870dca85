// False alarms of the card-number net on ordinary multilingual text (test/helpers/card-net-corpus.ts):
// the share of strings refused, by part of the corpus, and each refused string. `--net PATH`
// measures another copy of the net (for instance an older one, from `git show REV:src/core/money/card-net.ts`).
//
//   node_modules/.bin/bun scripts/card-net/corpus.ts [--net PATH] [--list]
import { resolve } from "node:path";
import { cardNetCorpus } from "../../test/helpers/card-net-corpus.ts";

const at = process.argv.indexOf("--net");
const path = at > 0 ? resolve(process.argv[at + 1]!) : resolve(import.meta.dir, "../../src/core/money/card-net.ts");
const { containsCardNumber } = (await import(path)) as { containsCardNumber: (text: string) => boolean };

const corpus = cardNetCorpus();
const parts = new Map<string, { total: number; refused: string[] }>();
for (const { source, text } of corpus) {
  const part = source.split("/")[0]!;
  const entry = parts.get(part) ?? { total: 0, refused: [] };
  entry.total++;
  if (containsCardNumber(text)) entry.refused.push(`${source}\t${text}`);
  parts.set(part, entry);
}
const pct = (n: number, of: number) => `${((100 * n) / of).toFixed(3)}%`;
let refused = 0;
console.log(`net: ${path}`);
for (const [part, { total, refused: list }] of parts) {
  refused += list.length;
  console.log(`${part.padEnd(8)} ${String(list.length).padStart(5)} of ${String(total).padStart(6)} refused (${pct(list.length, total)})`);
}
console.log(`${"all".padEnd(8)} ${String(refused).padStart(5)} of ${String(corpus.length).padStart(6)} refused (${pct(refused, corpus.length)})`);
if (process.argv.includes("--list")) for (const { refused: list } of parts.values()) for (const line of list) console.log(line);
