// `ask-only verify-receipt` as a real process: the receipt vectors, files written by the
// library, JSONL exports with a broken chain, and the usage and file errors.
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  chainLinkAfter,
  type Envelope,
  generateSigningKey,
  jwksOf,
  loadSigner,
  paramsSha256,
  type Receipt,
  type ReceiptFields,
  resultSha256,
  SHAPES_READ,
} from "../../src/core/receipt/index.ts";
import { runBinary } from "../helpers/binary.ts";
import { tempDir } from "../helpers/tmp.ts";
import { readVectors, VECTOR_JWKS } from "../vectors/receipts/vectors.ts";

const signer = loadSigner(generateSigningKey().privatePem);
const JWKS = jsonText(jwksOf(signer.publicJwk()));
const ARGS = { q: "état des stocks", n: 5 };
const RESULT = { content: [{ type: "text", text: "42 items" }] };

function jsonText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

function fields(over: Partial<ReceiptFields> = {}): ReceiptFields {
  return {
    id: "rcpt_e2e",
    issued_at: "2026-11-30T23:59:59.999Z",
    org_id: "org_1",
    key_id: "key_1",
    tool: "stock__count",
    outcome: "charged",
    http_status: 200,
    price_mc: 700,
    amount_mc: 700,
    upstream_cost_mc: 300,
    remaining_mc: 9300,
    period: "2026-11-30",
    params_sha256: paramsSha256(ARGS),
    result_sha256: resultSha256(RESULT),
    seq: 1,
    prev_sha256: null,
    ...over,
  };
}

function write(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const shapeRefused = (path: string) => `ask-only: error: ${path} is not a response verify-receipt reads\nask-only: hint: it should hold ${SHAPES_READ}\n`;
const failedLine = (n: number) => `ask-only: error: the receipt did not verify (${n} ${n === 1 ? "check" : "checks"} failed)\n`;

describe("verify-receipt on the receipt vectors", () => {
  for (const v of readVectors()) {
    test(`${v.name}: ${v.description}`, async () => {
      await using dir = tempDir();
      const response = write(dir.path, "response.json", v.body);
      const argv = ["verify-receipt", response, "--keys", VECTOR_JWKS];
      if (v.args !== undefined) argv.push("--args", write(dir.path, "args.json", v.args));
      const failed = v.stdout.filter((line) => line.startsWith("FAILED")).length;
      const refusedShape = v.stdout[0]!.startsWith("FAILED shape:");
      expect(await runBinary(argv)).toEqual({
        code: v.exit,
        stdout: `${v.stdout.join("\n")}\n`,
        stderr: v.exit === 0 ? "" : refusedShape ? shapeRefused(response) : failedLine(failed),
      });
    });
  }
});

describe("verify-receipt on files written by the library", () => {
  test("an intact response with its arguments: four ok lines, exit 0", async () => {
    await using dir = tempDir();
    const response = write(dir.path, "r.json", jsonText({ result: RESULT, receipt: signer.sign(fields()) }));
    const args = write(dir.path, "a.json", jsonText({ n: 5, q: "état des stocks" }));
    const keys = write(dir.path, "jwks.json", JWKS);
    expect(await runBinary(["verify-receipt", response, "--keys", keys, "--args", args])).toEqual({
      code: 0,
      stdout: `ok   signature (kid ${signer.kid})\nok   readable copy\nok   result (matches result_sha256)\nok   params (matches params_sha256)\n`,
      stderr: "",
    });
  });

  test("one digit of the amount in the readable copy: exit 1 naming amount_mc", async () => {
    await using dir = tempDir();
    const env = signer.sign(fields());
    const response = write(dir.path, "r.json", jsonText({ result: RESULT, receipt: { ...env, receipt: { ...env.receipt, amount_mc: 760 } } }));
    const r = await runBinary(["verify-receipt", response, "--keys", write(dir.path, "jwks.json", JWKS)]);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("\nFAILED readable copy: differs from signed payload at amount_mc\n");
    expect(r.stderr).toBe(failedLine(1));
  });
});

describe("verify-receipt --jsonl", () => {
  // 1,000 envelopes over 10 keys, interleaved as an export would list them.
  function exportOf(count: number, keys: number): Envelope[] {
    const last = new Map<string, Receipt>();
    const out: Envelope[] = [];
    for (let i = 0; i < count; i++) {
      const keyId = `key_${i % keys}`;
      const env = signer.sign(fields({ id: `rcpt_${i}`, key_id: keyId, ...chainLinkAfter(last.get(keyId) ?? null) }));
      last.set(keyId, env.receipt);
      out.push(env);
    }
    return out;
  }
  const all = exportOf(1000, 10);
  const lines = all.map((e) => JSON.stringify(e));

  async function run(text: string) {
    await using dir = tempDir();
    return await runBinary(["verify-receipt", "--jsonl", write(dir.path, "export.jsonl", text), "--keys", write(dir.path, "jwks.json", JWKS)]);
  }

  test("an intact export of 1,000 receipts: one summary line, exit 0", async () => {
    expect(await run(`${lines.join("\n")}\n`)).toEqual({
      code: 0,
      stdout: "1000 receipts of 10 keys: 1000 ok, 0 failed; chains intact\n",
      stderr: "",
    });
  });

  test("CRLF line ends and blank lines are tolerated", async () => {
    expect((await run(`${lines.slice(0, 20).join("\r\n")}\r\n\r\n`)).stdout).toBe("20 receipts of 10 keys: 20 ok, 0 failed; chains intact\n");
  });

  test("a deleted receipt breaks its key's chain at the next receipt of that key", async () => {
    const cut = [...lines.slice(0, 500), ...lines.slice(501)]; // line 501 (key_0, seq 51) gone
    expect(await run(`${cut.join("\n")}\n`)).toEqual({
      code: 1,
      stdout:
        "line 510: FAILED chain: key key_0: seq 52 after seq 50; expected seq 51 (a receipt is missing or out of order)\n" +
        "999 receipts of 10 keys: 999 ok, 0 failed; 1 chain break\n",
      stderr: "ask-only: error: the export did not verify\n",
    });
  });

  test("two receipts of one key swapped: each out-of-order step is reported", async () => {
    const swapped = [...lines];
    [swapped[100], swapped[110]] = [swapped[110]!, swapped[100]!]; // key_0 seq 11 and 12
    const r = await run(`${swapped.join("\n")}\n`);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe(
      "line 101: FAILED chain: key key_0: seq 12 after seq 10; expected seq 11 (a receipt is missing or out of order)\n" +
        "line 111: FAILED chain: key key_0: seq 11 after seq 12; expected seq 13 (a receipt is missing or out of order)\n" +
        "line 121: FAILED chain: key key_0: seq 13 after seq 11; expected seq 12 (a receipt is missing or out of order)\n" +
        "1000 receipts of 10 keys: 1000 ok, 0 failed; 3 chain breaks\n",
    );
  });

  test("a tampered line and a line that is not JSON are reported with their line numbers", async () => {
    const edited = [...lines];
    const env = all[7]!;
    edited[7] = JSON.stringify({ ...env, receipt: { ...env.receipt, remaining_mc: 9301 } });
    edited[8] = "{not json";
    const r = await run(`${edited.join("\n")}\n`);
    expect(r.code).toBe(1);
    expect(r.stdout).toStartWith(
      "line 8: FAILED readable copy: differs from signed payload at remaining_mc\nline 9: FAILED envelope: not JSON\n" +
        "line 19: FAILED chain: key key_8: seq 2 as the first receipt of the key; expected seq 1 (a receipt is missing or out of order)\n",
    );
    expect(r.stdout).toEndWith("1000 receipts of 10 keys: 998 ok, 2 failed; 1 chain break\n");
    expect(r.stderr).toBe("ask-only: error: the export did not verify\n");
  });

  test("an empty export fails", async () => {
    expect(await run("")).toEqual({
      code: 1,
      stdout: "0 receipts of 0 keys: 0 ok, 0 failed; chains intact\n",
      stderr: expect.stringMatching(/^ask-only: error: .*export\.jsonl holds no receipts\n$/),
    });
  });
});

describe("verify-receipt usage and file errors", () => {
  const USAGE_HINT = "ask-only: hint: run 'ask-only verify-receipt --help' for usage\n";

  test("usage errors exit 2 with a hint", async () => {
    await using dir = tempDir();
    const keys = write(dir.path, "jwks.json", JWKS);
    const resp = write(dir.path, "r.json", "{}");
    const cases: [string[], string][] = [
      [["verify-receipt"], "ask-only: error: --keys JWKS.json is required\n"],
      [["verify-receipt", resp], "ask-only: error: --keys JWKS.json is required\n"],
      [["verify-receipt", "--keys", keys], "ask-only: error: give either RESPONSE.json or --jsonl FILE\n"],
      [["verify-receipt", resp, "--jsonl", resp, "--keys", keys], "ask-only: error: give either RESPONSE.json or --jsonl FILE\n"],
      [["verify-receipt", "--jsonl", resp, "--keys", keys, "--args", resp], "ask-only: error: --args applies to RESPONSE.json, not to --jsonl\n"],
    ];
    for (const [argv, err] of cases) expect(await runBinary(argv)).toEqual({ code: 2, stdout: "", stderr: err + USAGE_HINT });
    const extra = await runBinary(["verify-receipt", resp, "--keys", keys, "--trust-me"]);
    expect(extra).toEqual({
      code: 2,
      stdout: "",
      stderr: `ask-only: error: unknown option '--trust-me'\n${USAGE_HINT}`,
    });
  });

  test("a missing file, a directory, malformed JSON and a bad key set exit 1 with a hint", async () => {
    await using dir = tempDir();
    const keys = write(dir.path, "jwks.json", JWKS);
    const resp = write(dir.path, "r.json", jsonText({ result: RESULT, receipt: signer.sign(fields()) }));
    const missing = join(dir.path, "nope.json");
    expect(await runBinary(["verify-receipt", missing, "--keys", keys])).toEqual({
      code: 1,
      stdout: "",
      stderr: `ask-only: error: cannot read ${missing}: ENOENT\nask-only: hint: check the path\n`,
    });
    const sub = join(dir.path, "sub");
    mkdirSync(sub);
    expect(await runBinary(["verify-receipt", resp, "--keys", sub])).toEqual({
      code: 1,
      stdout: "",
      stderr: `ask-only: error: cannot read ${sub}: EISDIR\n`,
    });
    const broken = write(dir.path, "broken.json", '{"result": ');
    expect(await runBinary(["verify-receipt", broken, "--keys", keys])).toEqual({
      code: 1,
      stdout: "",
      stderr: `ask-only: error: ${broken} is not JSON\nask-only: hint: it should hold ${SHAPES_READ}\n`,
    });
    const privateSet = write(dir.path, "private.json", jsonText({ keys: [{ ...signer.publicJwk(), d: "secret" }] }));
    expect(await runBinary(["verify-receipt", resp, "--keys", privateSet])).toEqual({
      code: 1,
      stdout: "",
      stderr:
        `ask-only: error: ${privateSet} is not a receipt key set: keys[0] holds private key material ("d")\n` +
        "ask-only: hint: the desk publishes it at GET /.well-known/receipt-signing-key.json\n",
    });
    expect((await runBinary(["verify-receipt", "--jsonl", missing, "--keys", keys])).stderr).toBe(
      `ask-only: error: cannot read ${missing}: ENOENT\nask-only: hint: check the path\n`,
    );
  });
});
