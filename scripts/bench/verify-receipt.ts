// Receipts: `verify-receipt --jsonl` through the compiled binary on N envelopes (receipts/s,
// whole process), next to the library doing the same work in-process (async, as the CLI does,
// and one at a time) and node:crypto's bare synchronous Ed25519 verify on one core; then signer.sign next to bare node:crypto sign, and canonical JSON of a
// ~1 KB object. Each round measures every rate once, in turn, so load on the shared machine
// hits all of them alike; the figures are medians over the rounds.
// Usage: bun scripts/bench/verify-receipt.ts [--count N] [--runs R]   (build the binary first)
import { sign as edSign, verify as edVerify } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  ChainVerifier,
  canonicalJson,
  chainLinkAfter,
  type Envelope,
  generateSigningKey,
  jwksOf,
  loadSigner,
  openEnvelope,
  openEnvelopeAsync,
  type OpenedEnvelope,
  paramsSha256,
  type Receipt,
  type ReceiptFields,
  ReceiptKeys,
  resultSha256,
} from "../../src/core/receipt/index.ts";

const flag = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) || fallback : fallback;
};
const count = flag("--count", 20000);
const runs = flag("--runs", 5);
const binary = resolve(import.meta.dir, "../../dist/ask-only");

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const perSecond = (n: number, ms: number) => Math.round((n / ms) * 1000);

function timed(n: number, fn: (i: number) => void): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) fn(i);
  return perSecond(n, performance.now() - t);
}

const generated = generateSigningKey();
const signer = loadSigner(generated.privatePem);
const jwks = jwksOf(signer.publicJwk());
const keys = ReceiptKeys.fromJwks(jwks);
const args = { query: "quarterly revenue by region", limit: 25, currency: "EUR" };
const result = { content: [{ type: "text", text: "x".repeat(300) }] };
const base = {
  org_id: "org_bench",
  issued_at: "2026-11-30T10:00:00.000Z",
  tool: "finance__report",
  outcome: "charged" as const,
  http_status: 200,
  price_mc: 1500,
  amount_mc: 1500,
  upstream_cost_mc: 600,
  period: "2026-11",
  params_sha256: paramsSha256(args),
  result_sha256: resultSha256(result),
};

// The export: `count` envelopes over 100 keys, chained, interleaved as the desk writes them.
const last = new Map<string, Receipt>();
const envelopes: Envelope[] = [];
for (let i = 0; i < count; i++) {
  const keyId = `key_${i % 100}`;
  const fields: ReceiptFields = {
    ...base,
    id: `rcpt_${String(i).padStart(8, "0")}`,
    key_id: keyId,
    remaining_mc: 1e9 - i,
    ...chainLinkAfter(last.get(keyId) ?? null),
  };
  const env = signer.sign(fields);
  last.set(keyId, env.receipt);
  envelopes.push(env);
}
const lines = envelopes.map((e) => JSON.stringify(e));
const sample = envelopes[0]!;
const sampleFields = Object.fromEntries(Object.entries(sample.receipt).filter(([k]) => k !== "v" && k !== "kid")) as ReceiptFields;
const payloadBytes = Buffer.from(sample.payload, "base64url");
const sigBytes = Buffer.from(sample.signature, "base64url");
const publicKey = keys.get(signer.kid)!;
const { createPrivateKey } = await import("node:crypto");
const privateKey = createPrivateKey(generated.privatePem);
const kilobyte = { ...sample.receipt, note: "y".repeat(300), tags: ["a", "b", "c"], nested: { z: 1, a: [1, 2, 3] } };

const dir = mkdtempSync(join(tmpdir(), "ask-only-bench-"));
const rates = {
  cli: [] as number[],
  libAsync: [] as number[],
  lib: [] as number[],
  rawVerify: [] as number[],
  sign: [] as number[],
  rawSign: [] as number[],
  canonical: [] as number[],
};
try {
  const file = join(dir, "export.jsonl");
  const keysFile = join(dir, "jwks.json");
  writeFileSync(file, `${lines.join("\n")}\n`);
  writeFileSync(keysFile, JSON.stringify(jwks));
  for (let r = 0; r < runs; r++) {
    const t = performance.now();
    const p = Bun.spawnSync([binary, "verify-receipt", "--jsonl", file, "--keys", keysFile], { stdout: "pipe", stderr: "pipe" });
    const ms = performance.now() - t;
    if (p.exitCode !== 0) throw new Error(`verify-receipt exited ${p.exitCode}: ${p.stdout}${p.stderr}`);
    rates.cli.push(perSecond(count, ms));

    let chain = new ChainVerifier();
    rates.lib.push(
      timed(count, (i) => {
        if (i === 0) chain = new ChainVerifier();
        const opened = openEnvelope(JSON.parse(lines[i]!), keys);
        if (!opened.checks.every((c) => c.ok)) throw new Error(`line ${i + 1} did not verify`);
        chain.add(i, opened.signed, opened.payloadSha256);
      }),
    );
    if (chain.failures.length > 0) throw new Error("the chain did not verify");
    chain = new ChainVerifier();
    const t2 = performance.now();
    const window: Promise<OpenedEnvelope>[] = [];
    const take = async () => {
      const opened = await window.shift()!;
      if (!opened.checks.every((c) => c.ok)) throw new Error("an envelope did not verify");
      chain.add(0, opened.signed, opened.payloadSha256);
    };
    for (const line of lines) {
      window.push(openEnvelopeAsync(JSON.parse(line), keys));
      if (window.length >= 256) await take();
    }
    while (window.length > 0) await take();
    rates.libAsync.push(perSecond(count, performance.now() - t2));
    if (chain.failures.length > 0) throw new Error("the chain did not verify");
    rates.rawVerify.push(timed(count, () => edVerify(null, payloadBytes, publicKey, sigBytes)));
    rates.sign.push(timed(count, () => signer.sign(sampleFields)));
    rates.rawSign.push(timed(count, () => edSign(null, payloadBytes, privateKey)));
    rates.canonical.push(timed(100_000, () => canonicalJson(kilobyte)));
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const m = {
  cli: median(rates.cli),
  lib: median(rates.lib),
  libAsync: median(rates.libAsync),
  rawVerify: median(rates.rawVerify),
  sign: median(rates.sign),
  rawSign: median(rates.rawSign),
  canonical: median(rates.canonical),
};
const fmt = (n: number) => n.toLocaleString("en").padStart(7);
console.log(`envelopes: ${count} (${(Buffer.byteLength(lines[0]!) / 1024).toFixed(1)} KB each, 100 keys); rounds: ${runs}; medians`);
console.log(`verify-receipt --jsonl, binary, whole process: ${fmt(m.cli)} receipts/s   binary/library-async ${(m.cli / m.libAsync).toFixed(2)}`);
console.log(`library, async window of 256 (as the CLI):     ${fmt(m.libAsync)} receipts/s   async/raw ${(m.libAsync / m.rawVerify).toFixed(2)}`);
console.log(`library, one at a time on one core:            ${fmt(m.lib)} receipts/s   library/raw ${(m.lib / m.rawVerify).toFixed(2)}`);
console.log(`node:crypto Ed25519 verify alone:              ${fmt(m.rawVerify)} /s`);
console.log(`signer.sign: check + canonical + sign:         ${fmt(m.sign)} receipts/s   sign/raw ${(m.sign / m.rawSign).toFixed(2)}`);
console.log(`node:crypto Ed25519 sign alone:                ${fmt(m.rawSign)} /s`);
console.log(`canonicalJson, ${Buffer.byteLength(canonicalJson(kilobyte))} B object:             ${fmt(m.canonical)} /s`);
