// Text from a file never reaches the terminal raw: a hostile string (screen clear, cursor home,
// hidden text, a fake `ok` line, bidi overrides, C1 controls, DEL) put in every place whose text
// `ask-only verify-receipt` or `ask-only desk check` prints, run through the compiled binary.
// stdout and stderr must hold no control byte but the newline, no DEL, no C1 control and no bidi
// control, and must show the string's escaped form (so the place really was printed).
import { describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { createPrivateKey, sign } from "node:crypto";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import {
  canonicalJson,
  chainLinkAfter,
  type Envelope,
  generateSigningKey,
  jwksOf,
  loadSigner,
  paramsSha256,
  type ReceiptFields,
  resultSha256,
} from "../../src/core/receipt/index.ts";
import { runBinary } from "../helpers/binary.ts";
import { tempDir } from "../helpers/tmp.ts";

const HOSTILE = "\u001b[2J\u001b[H\u001b[8mok   signature (kid x)\r\n\u202eevil\u2066\u0085\u009b31m\u007f\u200f";
/** How the recap's escaping shows the string's first character: proof the place was printed. */
const ESCAPED_ESC = "\\u{1b}[2J";

const BIDI = new Set([0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]);

/** Every code point of `text` that may not reach a terminal, as hex. */
function unsafe(text: string): string[] {
  const found: string[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if ((cp < 0x20 && cp !== 0x0a) || (cp >= 0x7f && cp <= 0x9f) || BIDI.has(cp)) found.push(cp.toString(16));
  }
  return found;
}

function expectClean(r: { stdout: string; stderr: string }) {
  expect(unsafe(r.stdout)).toEqual([]);
  expect(unsafe(r.stderr)).toEqual([]);
}

const key = generateSigningKey();
const signer = loadSigner(key.privatePem);
const JWKS = JSON.stringify(jwksOf(signer.publicJwk()));
const ARGS = { q: "x" };
const RESULT = { content: [{ type: "text", text: "ok" }] };

function fields(over: Partial<ReceiptFields> = {}): ReceiptFields {
  return {
    id: "rcpt_esc",
    issued_at: "2026-11-30T10:00:00.000Z",
    org_id: "org_1",
    key_id: "key_1",
    tool: "t__x",
    outcome: "charged",
    http_status: 200,
    price_mc: 10,
    amount_mc: 10,
    upstream_cost_mc: 0,
    remaining_mc: 90,
    period: "none",
    params_sha256: paramsSha256(ARGS),
    result_sha256: resultSha256(RESULT),
    ...chainLinkAfter(null),
    ...over,
  };
}

/** An envelope whose signed payload is `payload` as given (not a receipt the signer would make). */
function signedRaw(payload: Record<string, unknown>): Envelope {
  const bytes = Buffer.from(canonicalJson(payload));
  const signature = sign(null, bytes, createPrivateKey(key.privatePem)).toString("base64url");
  return { payload: bytes.toString("base64url"), signature, kid: signer.kid, receipt: payload as Envelope["receipt"] };
}

const q = (text: string) => JSON.stringify(text);
const charged = signer.sign(fields());

async function verify(body: string, args?: string) {
  await using dir = tempDir();
  const file = join(dir.path, "response.json");
  writeFileSync(file, body);
  writeFileSync(join(dir.path, "jwks.json"), JWKS);
  const argv = ["verify-receipt", file, "--keys", join(dir.path, "jwks.json")];
  if (args !== undefined) {
    writeFileSync(join(dir.path, "args.json"), args);
    argv.push("--args", join(dir.path, "args.json"));
  }
  return await runBinary(argv);
}

// Each place verify-receipt prints text taken from RESPONSE.json or ARGS.json.
const places: [string, () => { body: string; args?: string }][] = [
  ["the envelope's kid", () => ({ body: JSON.stringify({ result: RESULT, receipt: { ...charged, kid: HOSTILE } }) })],
  [
    "a field name of the readable copy",
    () => ({ body: JSON.stringify({ result: RESULT, receipt: { ...charged, receipt: { ...charged.receipt, [HOSTILE]: 1 } } }) }),
  ],
  [
    "a result key over a number with no canonical form (1e999)",
    () => ({ body: `{"result": {"content": [], ${q(HOSTILE)}: 1e999}, "receipt": ${JSON.stringify(charged)}}` }),
  ],
  [
    "a result key over a lone surrogate",
    () => ({ body: `{"result": {"content": [], ${q(HOSTILE)}: {"x": "\\ud800"}}, "receipt": ${JSON.stringify(charged)}}` }),
  ],
  ["an --args key over 1e999", () => ({ body: JSON.stringify({ result: RESULT, receipt: charged }), args: `{${q(HOSTILE)}: 1e999}` })],
  ["an --args key over a lone surrogate", () => ({ body: JSON.stringify({ result: RESULT, receipt: charged }), args: `{${q(HOSTILE)}: ["\\udfff"]}` })],
  ["a top-level key of a file that is no shape", () => ({ body: JSON.stringify({ [HOSTILE]: 1, receipt: charged }) })],
  ["a key of a JSON-RPC message that is no response", () => ({ body: JSON.stringify({ jsonrpc: "2.0", id: 1, [HOSTILE]: 1 }) })],
  [
    "a field of a signed payload that is not a receipt",
    () => ({ body: JSON.stringify({ result: RESULT, receipt: signedRaw({ ...charged.receipt, [HOSTILE]: 1 }) }) }),
  ],
];

describe("verify-receipt prints file text only escaped", () => {
  test.each(places)("%s", async (_place, make) => {
    const { body, args } = make();
    const r = await verify(body, args);
    expect(r.code).toBe(1);
    expectClean(r);
    expect(r.stdout).toContain(ESCAPED_ESC);
  });

  test("--jsonl: a kid, a readable field, a line that is no envelope and a chain's key id", async () => {
    const first = signer.sign(fields({ id: "r1", key_id: HOSTILE }));
    const second = signer.sign(fields({ id: "r2", key_id: HOSTILE, ...chainLinkAfter(first.receipt) }));
    const lines = [
      JSON.stringify({ ...charged, kid: HOSTILE }),
      JSON.stringify({ ...charged, receipt: { ...charged.receipt, [HOSTILE]: 1 } }),
      JSON.stringify({ [HOSTILE]: 1 }),
      JSON.stringify(second), // the first receipt of its key is missing: a chain break naming the key
    ];
    await using dir = tempDir();
    writeFileSync(join(dir.path, "export.jsonl"), `${lines.join("\n")}\n`);
    writeFileSync(join(dir.path, "jwks.json"), JWKS);
    const r = await runBinary(["verify-receipt", "--jsonl", join(dir.path, "export.jsonl"), "--keys", join(dir.path, "jwks.json")]);
    expect(r.code).toBe(1);
    expectClean(r);
    const out = r.stdout.split("\n");
    for (const n of [1, 2, 3]) expect(out.find((l) => l.startsWith(`line ${n}: FAILED`))).toContain(ESCAPED_ESC);
    expect(out.find((l) => l.startsWith("line 4: FAILED chain: key "))).toContain(ESCAPED_ESC);
  });
});

describe("desk check prints ledger text only escaped", () => {
  test("a key id, a period and a receipt id planted in the ledger", async () => {
    await using dir = tempDir("desk-check-esc-");
    chmodSync(dir.path, 0o700);
    const db = join(dir.path, "desk.db");
    await new SqliteDeskLedger(db).close();
    const raw = new Database(db);
    raw.run("PRAGMA foreign_keys = OFF");
    raw.run("INSERT INTO spend (key_id, period, spent_mc) VALUES (?, ?, 5)", [HOSTILE, HOSTILE]);
    // A receipt's columns are read out of its payload: the hostile id, key and kid are signed ones.
    const planted = signedRaw({ ...charged.receipt, id: HOSTILE, key_id: HOSTILE, kid: HOSTILE });
    raw.run("INSERT INTO receipts (payload, signature, sha256, issued_at) VALUES (?, ?, zeroblob(32), 0)", [
      Buffer.from(planted.payload, "base64url").toString("utf8"),
      Buffer.from(planted.signature, "base64url"),
    ]);
    raw.close();
    chmodSync(db, 0o600);
    const r = await runBinary(["desk", "check", "--data", dir.path]);
    expect(r.code).toBe(1);
    expectClean(r);
    const failed = r.stdout.split("\n").filter((l) => l.startsWith("FAILED: "));
    expect(failed.find((l) => l.startsWith("FAILED: key "))).toContain(ESCAPED_ESC);
    expect(failed.find((l) => l.startsWith("FAILED: receipt "))).toContain(ESCAPED_ESC);
  });
});
