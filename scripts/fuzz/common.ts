// What the ask-side reliability scripts share: flags, the summary they print, and small helpers.
import type { OutputWatch } from "../../test/helpers/approver-process.ts";

/** Resolves once the stream has ended (the process exited and its pipe drained). */
export async function untilEnded(watch: OutputWatch): Promise<void> {
  // A pattern that never matches: waitFor settles when the stream ends.
  await watch.waitFor(/(?!)/, 0, 30_000).catch(() => {});
}

export const bump = (m: Record<string, number>, k: string) => {
  m[k] = (m[k] ?? 0) + 1;
};

export function formatSummary(
  name: string,
  s: { runs: number; seed: number; elapsedMs: number; failures: string[] },
  tables: Record<string, Record<string, number>>,
  extra = "",
): string {
  const lines = [`${name}: seed ${s.seed}, ${s.runs} runs`];
  for (const [title, table] of Object.entries(tables)) {
    lines.push(`  ${title}:`);
    for (const [k, n] of Object.entries(table).sort((a, b) => b[1] - a[1])) lines.push(`    ${String(n).padStart(7)}  ${k}`);
  }
  if (extra) lines.push(`  ${extra}`);
  const seconds = s.elapsedMs / 1000;
  lines.push(
    `${s.failures.length === 0 ? "ok" : `FAILED (${s.failures.length})`}: ${name} ${s.runs} runs in ${seconds.toFixed(1)} s (${Math.round(s.runs / seconds)}/s)`,
  );
  for (const f of s.failures.slice(0, 30)) lines.push(`  ! ${f}`);
  return lines.join("\n");
}

export function cliOptions(script: string, defaultRuns: number): { runs: number; seed: number; concurrency?: number } {
  const flag = (name: string) => {
    const i = process.argv.indexOf(name);
    return i === -1 ? undefined : process.argv[i + 1];
  };
  const runs = Number(flag("--runs") ?? defaultRuns);
  const seed = Number(flag("--seed") ?? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0);
  const concurrency = flag("--concurrency") === undefined ? undefined : Number(flag("--concurrency"));
  if (!Number.isSafeInteger(runs) || runs < 1 || !Number.isSafeInteger(seed) || (concurrency !== undefined && !(concurrency >= 1))) {
    console.error(`usage: bun ${script} [--runs N] [--seed S] [--concurrency C]`);
    process.exit(2);
  }
  console.log(`${script}: seed ${seed}, ${runs} runs (replay: bun ${script} --seed ${seed} --runs ${runs})`);
  return { runs, seed, concurrency };
}

/** The only lines the approver's log may hold in these runs: its own, never a request's text. */
export const APPROVER_LOG = [
  /^ask-only: approver listening on https:\/\/127\.0\.0\.1:\d+ \(mutual TLS only\)$/,
  /^ask-only: ask ledger: \S+$/,
  /^ask-only: trusting clients certified by CN=ask-only client CA, O=ask-only \(\S+, sha256 [0-9A-F:]+\)$/,
  /^ask-only: decisions signed with \S+ \(kid [A-Za-z0-9_-]{43}(, new)?\); ask-only approver --print-decision-keys prints the key set$/,
  /^ask-only: asks wait \S+ for a decision; at most \d+ pending; amounts up to [0-9.]+$/,
  /^ask-only: type "help" for the console commands$/,
  /^ask-only: console input closed; still serving; stop with Ctrl-C or SIGTERM$/,
  /^ask-only: approver stopped \(SIGTERM\)$/,
];

/** The digits of a text, any script read as ASCII, percent-escapes decoded: where a hidden number would show. */
export function digitsOf(text: string): string {
  let decoded = text;
  try {
    decoded = decodeURIComponent(text.replace(/%(?![0-9A-Fa-f]{2})/g, "%25"));
  } catch {
    // A malformed escape: scan the text as it is.
  }
  let out = "";
  for (const ch of decoded.normalize("NFKC")) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0x30 && cp <= 0x39) out += ch;
    else if (cp >= 0x660 && cp <= 0x669) out += String(cp - 0x660);
    else if (cp >= 0x966 && cp <= 0x96f) out += String(cp - 0x966);
  }
  return out;
}
