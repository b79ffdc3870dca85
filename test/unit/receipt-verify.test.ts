// Signing and offline verification: a round trip, then each tampering fails its own check and
// (where the others cannot notice) only that one.
import { describe, expect, test } from "bun:test";
import { createPrivateKey, generateKeyPairSync, sign } from "node:crypto";
import fc from "fast-check";
import { displayRows } from "../../src/core/recap/sanitize.ts";
import {
  bindResult,
  type Check,
  chainLinkAfter,
  describeCheck,
  type Envelope,
  generateSigningKey,
  hashJson,
  jwkThumbprint,
  jwksOf,
  loadSigner,
  MCP_RECEIPT_META_KEY,
  paramsSha256,
  printable,
  type Receipt,
  type ReceiptFields,
  ReceiptInvalidError,
  ReceiptKeyError,
  ReceiptKeys,
  readShape,
  resultForHashing,
  resultSha256,
  verifyChain,
  verifyEnvelope,
  verifyResponse,
  withReceipt,
} from "../../src/core/receipt/index.ts";

const signer = loadSigner(generateSigningKey().privatePem);
const retired = loadSigner(generateSigningKey().privatePem);
const stranger = loadSigner(generateSigningKey().privatePem);
const jwks = jwksOf(signer.publicJwk(), [retired.publicJwk()]);

const ARGS = { query: "weather in Lyon", units: "metric", limit: 3 };
const RESULT = { content: [{ type: "text", text: "Lyon: 14°C, light rain" }], structuredContent: { temp_c: 14 } };

function fields(over: Partial<ReceiptFields> = {}): ReceiptFields {
  return {
    id: "rcpt_01JX0000000000000000000001",
    issued_at: "2026-11-30T12:34:56.789Z",
    org_id: "org_acme",
    key_id: "key_agent7",
    tool: "weather__forecast",
    outcome: "charged",
    http_status: 200,
    price_mc: 2500,
    amount_mc: 2500,
    upstream_cost_mc: 1000,
    remaining_mc: 97500,
    period: "2026-11-30",
    params_sha256: paramsSha256(ARGS),
    result_sha256: resultSha256(RESULT),
    seq: 1,
    prev_sha256: null,
    ...over,
  };
}

const REFUSAL = { outcome: "refused_budget", http_status: 402, amount_mc: 0, result_sha256: null } as const;

/** name -> "ok" | "skip" | "FAILED: detail", for compact assertions. */
function verdicts(checks: Check[]): Record<string, string> {
  return Object.fromEntries(checks.map((c) => [c.name, c.skipped ? "skip" : c.ok ? "ok" : `FAILED: ${c.detail}`]));
}

const ALL_OK = { signature: "ok", readable_copy: "ok", result: "ok", params: "ok" };

function encode(text: string): string {
  return Buffer.from(text, "utf8").toString("base64url");
}
function decode(payload: string): string {
  return Buffer.from(payload, "base64url").toString("utf8");
}

describe("signing", () => {
  test("kid is the RFC 7638 thumbprint (RFC 8037 A.3 vector) and the JWK is public only", () => {
    expect(jwkThumbprint("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")).toBe("kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    const generated = generateSigningKey();
    const loaded = loadSigner(generated.privatePem);
    expect(loaded.kid).toBe(generated.kid);
    expect(loaded.publicJwk()).toEqual({ ...generated.publicJwk });
    expect(Object.keys(loaded.publicJwk()).sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x"]);
    expect(loaded.publicJwk()).toMatchObject({ kty: "OKP", crv: "Ed25519", use: "sig", alg: "EdDSA", kid: loaded.kid });
    expect(jwkThumbprint(loaded.publicJwk().x)).toBe(loaded.kid);
  });

  test("the payload is the canonical JSON of the receipt and the signature is over its bytes", () => {
    const env = signer.sign(fields());
    const text = decode(env.payload);
    expect(text).toBe(JSON.stringify(Object.fromEntries(Object.entries(env.receipt).sort(([a], [b]) => (a < b ? -1 : 1)))));
    expect(env.receipt).toMatchObject({ v: 1, kid: signer.kid });
    expect(env.kid).toBe(signer.kid);
    expect(env.payload).not.toContain("=");
    expect(Buffer.from(env.signature, "base64url")).toHaveLength(64);
  });

  test("the readable copy lists fields in the documented order", () => {
    expect(Object.keys(signer.sign(fields()).receipt)).toEqual([
      "v",
      "id",
      "kid",
      "issued_at",
      "org_id",
      "key_id",
      "tool",
      "outcome",
      "http_status",
      "price_mc",
      "amount_mc",
      "upstream_cost_mc",
      "remaining_mc",
      "period",
      "params_sha256",
      "result_sha256",
      "seq",
      "prev_sha256",
    ]);
  });

  test("the signer refuses a receipt that breaks the rules, naming the field", () => {
    const refused = (over: Record<string, unknown>) => {
      try {
        signer.sign({ ...fields(), ...over } as ReceiptFields);
      } catch (err) {
        expect(err).toBeInstanceOf(ReceiptInvalidError);
        return (err as Error).message.replace("refusing to sign an invalid receipt: ", "");
      }
      return "signed";
    };
    expect(refused({ amount_mc: 2501 })).toBe("amount_mc: must be at most price_mc when charged and 0 otherwise");
    expect(refused({ ...REFUSAL, amount_mc: 1 })).toBe("amount_mc: must be at most price_mc when charged and 0 otherwise");
    expect(refused({ result_sha256: null })).toBe("result_sha256: must be set exactly when charged");
    expect(refused({ ...REFUSAL, result_sha256: resultSha256(RESULT) })).toBe("result_sha256: must be set exactly when charged");
    expect(refused({ seq: 2 })).toBe("prev_sha256: must be null exactly when seq is 1");
    expect(refused({ prev_sha256: "a".repeat(64) })).toBe("prev_sha256: must be null exactly when seq is 1");
    expect(refused({ price_mc: 2 ** 53 })).toBe("price_mc: invalid value");
    expect(refused({ remaining_mc: -1 })).toBe("remaining_mc: invalid value");
    expect(refused({ remaining_mc: 1.5 })).toBe("remaining_mc: invalid value");
    expect(refused({ issued_at: "2026-11-30T12:34:56Z" })).toBe("issued_at: invalid value");
    expect(refused({ issued_at: "2026-11-30T12:34:56.789+01:00" })).toBe("issued_at: invalid value");
    expect(refused({ period: "2026-13" })).toBe("period: invalid value");
    expect(refused({ outcome: "refunded" })).toBe("outcome: invalid value");
    expect(refused({ params_sha256: "A".repeat(64) })).toBe("params_sha256: invalid value");
    expect(refused({ seq: 0 })).toBe("seq: invalid value");
    expect(refused({ note: "x" })).toBe("note: unknown field");
    expect(refused({ tool: undefined })).toBe("tool: invalid value");
    expect(refused({ period: "none" })).toBe("signed");
    expect(refused({ period: "2026-11" })).toBe("signed");
  });

  test("loadSigner accepts only an Ed25519 PEM private key", () => {
    const p256 = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({ format: "pem", type: "pkcs8" }).toString();
    expect(() => loadSigner(p256)).toThrow(ReceiptKeyError);
    expect(() => loadSigner("not a key")).toThrow(ReceiptKeyError);
    const pub = generateKeyPairSync("ed25519").publicKey.export({ format: "pem", type: "spki" }).toString();
    expect(() => loadSigner(pub)).toThrow(ReceiptKeyError);
  });
});

describe("verifyResponse on a REST body", () => {
  const env = signer.sign(fields());
  const body = () => structuredClone({ result: RESULT, receipt: env });

  test("an intact response passes all four checks", () => {
    expect(verdicts(verifyResponse(body(), jwks, ARGS))).toEqual(ALL_OK);
  });

  test("without arguments the params check is skipped, and still counts as passing", () => {
    const checks = verifyResponse(body(), jwks);
    expect(verdicts(checks)).toEqual({ ...ALL_OK, params: "skip" });
    expect(checks.every((c) => c.ok)).toBe(true);
  });

  test("key order in the result and the arguments does not matter", () => {
    const reordered = { structuredContent: { temp_c: 14 }, content: [{ text: "Lyon: 14°C, light rain", type: "text" }] };
    const args = { limit: 3, units: "metric", query: "weather in Lyon" };
    expect(verdicts(verifyResponse({ receipt: env, result: reordered }, jwks, args))).toEqual(ALL_OK);
  });

  test("one digit of amount_mc in the readable copy: only readable_copy fails, naming the field", () => {
    const b = body();
    b.receipt.receipt.amount_mc = 2509;
    expect(verdicts(verifyResponse(b, jwks, ARGS))).toEqual({
      ...ALL_OK,
      readable_copy: "FAILED: differs from signed payload at amount_mc",
    });
  });

  test("one digit of amount_mc in the signed payload: the signature fails and the copy differs", () => {
    const b = body();
    b.receipt.payload = encode(decode(env.payload).replace('"amount_mc":2500', '"amount_mc":2000'));
    expect(verdicts(verifyResponse(b, jwks, ARGS))).toEqual({
      ...ALL_OK,
      signature: `FAILED: does not verify under kid ${signer.kid}`,
      readable_copy: "FAILED: differs from signed payload at amount_mc",
    });
  });

  test("one character of the answer: only result fails", () => {
    const b = body();
    b.result.content[0]!.text = "Lyon: 15°C, light rain";
    expect(verdicts(verifyResponse(b, jwks, ARGS))).toEqual({ ...ALL_OK, result: "FAILED: result_sha256 differs" });
  });

  test("a forged answer with its hash written into the readable copy still fails: hashes come from the signed payload", () => {
    const b = body();
    const forged = { content: [{ type: "text", text: "Lyon: 30°C, sunny" }], structuredContent: { temp_c: 30 } };
    b.result = forged;
    b.receipt.receipt.result_sha256 = resultSha256(forged);
    b.receipt.receipt.params_sha256 = paramsSha256({ query: "other" });
    expect(verdicts(verifyResponse(b, jwks, { query: "other" }))).toEqual({
      signature: "ok",
      readable_copy: "FAILED: differs from signed payload at params_sha256, result_sha256",
      result: "FAILED: result_sha256 differs",
      params: "FAILED: params_sha256 differs",
    });
  });

  test("one character of the arguments: only params fails", () => {
    expect(verdicts(verifyResponse(body(), jwks, { ...ARGS, query: "weather in LyoN" }))).toEqual({
      ...ALL_OK,
      params: "FAILED: params_sha256 differs",
    });
  });

  test("a receipt signed by another key (its own kid) fails the signature as an unknown kid", () => {
    const other = stranger.sign(fields());
    expect(verdicts(verifyResponse({ result: RESULT, receipt: other }, jwks, ARGS))).toEqual({
      ...ALL_OK,
      signature: `FAILED: unknown kid ${stranger.kid} (not in the key set)`,
    });
  });

  test("another key's signature presented under our kid does not verify", () => {
    const receipt: Receipt = { ...signer.sign(fields()).receipt };
    const bytes = Buffer.from(decode(signer.sign(fields()).payload), "utf8");
    const forged: Envelope = {
      payload: bytes.toString("base64url"),
      signature: stranger.sign(fields()).signature,
      kid: signer.kid,
      receipt,
    };
    expect(verdicts(verifyResponse({ result: RESULT, receipt: forged }, jwks, ARGS)).signature).toBe(`FAILED: does not verify under kid ${signer.kid}`);
  });

  test("an envelope kid that is not in the key set fails as unknown", () => {
    const b = body();
    b.receipt.kid = "no-such-kid";
    expect(verdicts(verifyResponse(b, jwks, ARGS)).signature).toBe("FAILED: unknown kid no-such-kid (not in the key set)");
  });

  test("a receipt of a retired key still verifies while the JWKS lists it", () => {
    const old = retired.sign(fields());
    expect(verdicts(verifyResponse({ result: RESULT, receipt: old }, jwks, ARGS))).toEqual(ALL_OK);
    expect(verdicts(verifyResponse({ result: RESULT, receipt: old }, jwksOf(signer.publicJwk()), ARGS)).signature).toStartWith("FAILED: unknown kid");
  });

  test("a validly signed payload that is not canonical JSON is refused", () => {
    const key = createPrivateKey(generateSigningKey().privatePem);
    const x = String(key.export({ format: "jwk" }).x);
    const kid = jwkThumbprint(x);
    const receipt = { ...signer.sign(fields()).receipt, kid };
    const loose = Buffer.from(JSON.stringify(receipt), "utf8"); // field order, not sorted
    const env2 = { payload: loose.toString("base64url"), signature: sign(null, loose, key).toString("base64url"), kid, receipt };
    const keys = { keys: [{ kty: "OKP" as const, crv: "Ed25519" as const, x, kid, use: "sig" as const, alg: "EdDSA" as const }] };
    expect(verdicts(verifyEnvelope(env2, keys)).signature).toBe("FAILED: the signed payload is not canonical JSON");
  });

  test("a signed payload whose kid differs from the envelope's is refused", () => {
    const key = createPrivateKey(generateSigningKey().privatePem);
    const x = String(key.export({ format: "jwk" }).x);
    const kid = jwkThumbprint(x);
    const receipt = { ...signer.sign(fields()).receipt, kid: "someone-else" };
    const bytes = Buffer.from(JSON.stringify(Object.fromEntries(Object.entries(receipt).sort(([a], [b]) => (a < b ? -1 : 1)))));
    const env2 = { payload: bytes.toString("base64url"), signature: sign(null, bytes, key).toString("base64url"), kid, receipt };
    expect(verdicts(verifyEnvelope(env2, { keys: [{ kty: "OKP", crv: "Ed25519", x, kid, use: "sig", alg: "EdDSA" }] })).signature).toBe(
      "FAILED: the signed kid differs from the envelope kid",
    );
  });

  test("a re-spelled payload (padding) or a mangled signature fails, and never throws", () => {
    const b = body();
    b.receipt.payload = `${env.payload}=`;
    expect(verdicts(verifyResponse(b, jwks, ARGS))).toEqual({ envelope: "FAILED: payload is not base64url" });
    const c = body();
    const flipped = env.signature[10] === "A" ? "B" : "A";
    c.receipt.signature = `${env.signature.slice(0, 10)}${flipped}${env.signature.slice(11)}`;
    expect(verdicts(verifyResponse(c, jwks, ARGS)).signature).toStartWith("FAILED: does not verify");
    for (const junk of [null, 1, "x", [], {}, { receipt: 1 }, { receipt: { payload: 1 } }]) {
      expect(verifyResponse(junk, jwks).some((c) => !c.ok)).toBe(true);
    }
  });

  test("the readable copy names every differing field, and a missing copy fails", () => {
    const b = body();
    b.receipt.receipt.remaining_mc = 1;
    (b.receipt.receipt as Record<string, unknown>).bonus = true;
    expect(verdicts(verifyResponse(b, jwks, ARGS)).readable_copy).toBe("FAILED: differs from signed payload at remaining_mc, bonus");
    const c = body() as { receipt: Partial<Envelope> };
    delete c.receipt.receipt;
    expect(verdicts(verifyResponse(c, jwks, ARGS)).readable_copy).toBe("FAILED: the envelope has no readable copy");
  });

  test("text from the file is escaped before it reaches a terminal", () => {
    const b = body();
    b.receipt.kid = "\u001b[31mred\u202e";
    const line = describeCheck(verifyResponse(b, jwks, ARGS)[0]!);
    expect(line).toBe("FAILED signature: unknown kid \\u{1b}[31mred\\u{202e} (not in the key set)");
  });
});

describe("any change is caught", () => {
  const mcpResult = { ...RESULT, _meta: { trace: "t1" } };
  const bodies = {
    rest: JSON.stringify({ result: RESULT, receipt: signer.sign(fields()) }),
    mcp: JSON.stringify(withReceipt(mcpResult, signer.sign(fields({ result_sha256: resultSha256(mcpResult) })))),
  };
  const ALPHABET = '0123456789abcdefABCDEF_-"{}[]:,. xyzé\\';

  test.each(Object.entries(bodies))("property: every one-character change to a saved %s body that still parses fails a check", (_kind, saved) => {
    expect(verifyResponse(JSON.parse(saved), jwks).every((c) => c.ok)).toBe(true);
    let parsedMutants = 0;
    fc.assert(
      fc.property(fc.nat({ max: saved.length - 1 }), fc.constantFrom(...ALPHABET), (at, ch) => {
        if (saved[at] === ch) return;
        const text = saved.slice(0, at) + ch + saved.slice(at + 1);
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          return;
        }
        parsedMutants++;
        const checks = verifyResponse(body, jwks);
        expect(`${at}:${ch} ${checks.every((c) => c.ok)}`).toBe(`${at}:${ch} false`);
      }),
      { numRuns: 1500 },
    );
    expect(parsedMutants).toBeGreaterThan(300);
  });

  test("property: arbitrary JSON never makes the verifier throw, and never passes", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(verifyResponse(value, jwks, value).some((c) => !c.ok)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe("refusals and bare envelopes", () => {
  test("a refusal body {error, receipt} passes with no result bound", () => {
    const env = signer.sign(fields(REFUSAL));
    expect(verdicts(verifyResponse({ error: "BUDGET_EXHAUSTED", receipt: env }, jwks, ARGS))).toEqual(ALL_OK);
    expect(verifyResponse({ error: "BUDGET_EXHAUSTED", receipt: env }, jwks)[2]!.detail).toBe("none returned, none paid for: refused_budget");
  });

  test("a charged receipt pasted into a refusal body fails the result check", () => {
    const env = signer.sign(fields());
    expect(verdicts(verifyResponse({ error: "BUDGET_EXHAUSTED", receipt: env }, jwks)).result).toBe(
      "FAILED: result_sha256 is set but the response holds no result",
    );
  });

  test("a refusal receipt next to a result does not make that result a paid answer", () => {
    const env = signer.sign(fields(REFUSAL));
    expect(verdicts(verifyResponse({ result: RESULT, receipt: env }, jwks)).result).toBe("FAILED: the response holds a result but result_sha256 is null");
  });

  test("a bare envelope checks signature and copy; result is skipped", () => {
    const env = signer.sign(fields());
    expect(verdicts(verifyResponse(env, jwks, ARGS))).toEqual({ ...ALL_OK, result: "skip" });
    expect(verdicts(verifyEnvelope(env, jwks))).toEqual({ signature: "ok", readable_copy: "ok" });
  });
});

describe("MCP tools/call results", () => {
  const mcp = (over: Partial<ReceiptFields> = {}, result: Record<string, unknown> = RESULT) => {
    const env = signer.sign(fields({ result_sha256: resultSha256(result), ...over }));
    const meta = { ...(result._meta as object | undefined), [MCP_RECEIPT_META_KEY]: env };
    return { ...structuredClone(result), _meta: meta };
  };

  test("resultForHashing drops the receipt entry, and _meta when nothing else is left", () => {
    const env = signer.sign(fields());
    const withOnly = { ...RESULT, _meta: { [MCP_RECEIPT_META_KEY]: env } };
    expect(resultForHashing(withOnly)).toEqual(RESULT);
    expect(Object.hasOwn(resultForHashing(withOnly) as object, "_meta")).toBe(false);
    const withOther = { ...RESULT, _meta: { trace: "t1", [MCP_RECEIPT_META_KEY]: env } };
    expect(resultForHashing(withOther)).toEqual({ ...RESULT, _meta: { trace: "t1" } });
    expect(withOther._meta[MCP_RECEIPT_META_KEY]).toBe(env); // input untouched
    expect(resultForHashing(RESULT)).toBe(RESULT);
    expect(resultForHashing([1])).toEqual([1]);
    expect(resultSha256(withOnly)).toBe(hashJson(RESULT));
  });

  test("withReceipt attaches the envelope, replacing an upstream's own entry of that name", () => {
    const upstream = { ...RESULT, _meta: { trace: "t1", [MCP_RECEIPT_META_KEY]: { forged: true } } };
    const env = signer.sign(fields({ result_sha256: resultSha256(upstream) }));
    const sent = withReceipt(upstream, env);
    expect(sent._meta).toEqual({ trace: "t1", [MCP_RECEIPT_META_KEY]: env });
    expect(upstream._meta[MCP_RECEIPT_META_KEY]).toEqual({ forged: true }); // input untouched
    expect(verdicts(verifyResponse(JSON.parse(JSON.stringify(sent)), jwks, ARGS))).toEqual(ALL_OK);
    expect(withReceipt(RESULT, env)._meta).toEqual({ [MCP_RECEIPT_META_KEY]: env });
  });

  test("a saved MCP result passes, with or without other _meta entries", () => {
    expect(verdicts(verifyResponse(mcp(), jwks, ARGS))).toEqual(ALL_OK);
    expect(verdicts(verifyResponse(mcp({}, { ...RESULT, _meta: { trace: "t1" } }), jwks, ARGS))).toEqual(ALL_OK);
  });

  test("the whole JSON-RPC response saved from the wire verifies like its result", () => {
    const wire = { jsonrpc: "2.0", id: 7, result: mcp() };
    expect(verdicts(verifyResponse(wire, jwks, ARGS))).toEqual(ALL_OK);
    const tampered = structuredClone(wire) as unknown as { result: { content: { text: string }[] } };
    tampered.result.content[0]!.text = "Lyon: 41°C, light rain";
    expect(verdicts(verifyResponse(tampered, jwks, ARGS)).result).toBe("FAILED: result_sha256 differs");
  });

  test("one character of the MCP answer, or of another _meta entry, fails the result check", () => {
    type Loose = { content: { text: string }[]; _meta: Record<string, unknown>; isError?: boolean };
    const a = mcp() as unknown as Loose;
    a.content[0]!.text = "Lyon: 14°C, light raiN";
    expect(verdicts(verifyResponse(a, jwks, ARGS))).toEqual({ ...ALL_OK, result: "FAILED: result_sha256 differs" });
    const b = mcp({}, { ...RESULT, _meta: { trace: "t1" } }) as unknown as Loose;
    b._meta.trace = "t2";
    expect(verdicts(verifyResponse(b, jwks, ARGS)).result).toBe("FAILED: result_sha256 differs");
    const c = mcp() as unknown as Loose;
    c.isError = false; // a key the desk did not send
    expect(verdicts(verifyResponse(c, jwks, ARGS)).result).toBe("FAILED: result_sha256 differs");
  });

  test("an MCP refusal (isError, no result bound) passes; a non-error answer under it fails", () => {
    const refusal = { content: [{ type: "text", text: '{"error":"BUDGET_EXHAUSTED"}' }], structuredContent: { error: "BUDGET_EXHAUSTED" }, isError: true };
    const env = signer.sign(fields(REFUSAL));
    const saved = { ...refusal, _meta: { [MCP_RECEIPT_META_KEY]: env } };
    expect(verdicts(verifyResponse(saved, jwks, ARGS))).toEqual(ALL_OK);
    const posing = { ...RESULT, _meta: { [MCP_RECEIPT_META_KEY]: env } };
    expect(verdicts(verifyResponse(posing, jwks, ARGS)).result).toBe("FAILED: the response holds a result but result_sha256 is null");
  });
});

describe("key sets", () => {
  const good = signer.publicJwk();
  const load = (keys: unknown[]) => {
    try {
      ReceiptKeys.fromJwks({ keys });
      return "loaded";
    } catch (err) {
      expect(err).toBeInstanceOf(ReceiptKeyError);
      return (err as Error).message;
    }
  };

  test("a JWKS of public Ed25519 keys whose kid is their thumbprint loads", () => {
    expect(load([good, retired.publicJwk()])).toBe("loaded");
    expect(ReceiptKeys.fromJwks({ keys: [good] }).kids).toEqual([signer.kid]);
  });

  test("private material, other key types, a kid that is not the thumbprint and repeats are refused", () => {
    expect(load([{ ...good, d: "AAAA" }])).toBe('keys[0] holds private key material ("d")');
    expect(load([{ ...good, crv: "P-256" }])).toBe("keys[0] is not an Ed25519 (OKP) key");
    expect(load([{ ...good, kid: "my-key" }])).toBe("keys[0] has a kid that is not its RFC 7638 thumbprint");
    expect(load([good, good])).toBe(`keys[1] repeats kid ${signer.kid}`);
    expect(load([{ ...good, x: "short" }])).toBe('keys[0] has no valid "x"');
    expect(load([{ ...good, use: "enc" }])).toBe('keys[0] has use other than "sig"');
    expect(() => ReceiptKeys.fromJwks([good])).toThrow('not a JWKS: expected {"keys": [...]}');
  });
});

describe("chains", () => {
  function chainOf(keyId: string, n: number, s = signer): Envelope[] {
    const out: Envelope[] = [];
    let prev: Receipt | null = null;
    for (let i = 0; i < n; i++) {
      const env = s.sign(fields({ key_id: keyId, id: `rcpt_${keyId}_${i}`, ...chainLinkAfter(prev) }));
      out.push(env);
      prev = env.receipt;
    }
    return out;
  }

  test("chainLinkAfter: seq 1 with null, then the previous payload's hash", () => {
    expect(chainLinkAfter(null)).toEqual({ seq: 1, prev_sha256: null });
    const first = signer.sign(fields());
    const digest = new Bun.CryptoHasher("sha256").update(Buffer.from(first.payload, "base64url")).digest("hex");
    expect(chainLinkAfter(first.receipt)).toEqual({ seq: 2, prev_sha256: digest });
  });

  test("interleaved intact chains of several keys pass, across a key rotation", () => {
    const a = chainOf("key_a", 4);
    const b = [...chainOf("key_b", 2), ...chainOf("key_b", 3, retired).slice(2)];
    const list = [a[0], b[0], a[1], a[2], b[1], a[3]];
    expect(verifyChain(list)).toEqual({ keys: 2, failures: [] });
  });

  test("a deleted, reordered, duplicated or re-linked receipt breaks its key's chain", () => {
    const a = chainOf("key_a", 5);
    expect(verifyChain([a[0], a[1], a[3], a[4]]).failures).toEqual([
      { index: 2, key_id: "key_a", detail: "seq 4 after seq 2; expected seq 3 (a receipt is missing or out of order)" },
    ]);
    expect(verifyChain([a[0], a[2], a[1]]).failures.map((f) => f.index)).toEqual([1, 2]);
    expect(verifyChain([a[0], a[1], a[1]]).failures.map((f) => f.index)).toEqual([2]);
    expect(verifyChain([a[1], a[2]]).failures).toEqual([
      { index: 0, key_id: "key_a", detail: "seq 2 as the first receipt of the key; expected seq 1 (a receipt is missing or out of order)" },
    ]);
    // A receipt re-signed with different contents but the same seq: the next link no longer matches.
    const altered = signer.sign(fields({ key_id: "key_a", id: "rcpt_other", ...chainLinkAfter(a[0]!.receipt) }));
    expect(verifyChain([a[0], altered, a[2]]).failures).toEqual([{ index: 2, key_id: "key_a", detail: "prev_sha256 differs from the hash of seq 2" }]);
  });
});

describe("the result without our receipt: one definition for the desk and the verifier", () => {
  const others = fc.dictionary(
    fc.string({ maxLength: 6 }).filter((k) => k !== MCP_RECEIPT_META_KEY),
    fc.jsonValue({ maxDepth: 2 }),
    { maxKeys: 3 },
  );
  const meta = fc.oneof(
    fc.constant(undefined),
    fc.constant({}),
    others,
    others.map((o) => ({ ...o, [MCP_RECEIPT_META_KEY]: "theirs" })),
    fc.constant({ [MCP_RECEIPT_META_KEY]: { forged: true } }),
  );
  const upstream = fc
    .tuple(
      fc.dictionary(
        fc.string({ maxLength: 6 }).filter((k) => k !== "_meta"),
        fc.jsonValue({ maxDepth: 2 }),
        { maxKeys: 4 },
      ),
      meta,
    )
    .map(([rest, m]) => (m === undefined ? rest : { ...rest, _meta: m }) as Record<string, unknown>);

  test("property: for every _meta shape, both transports hash what the agent receives to the hash the desk signed", () => {
    const env = signer.sign(fields());
    fc.assert(
      fc.property(upstream, (r) => {
        const bound = bindResult(r)!;
        // What the agent gets: the upstream's result less its own receipt entry, nothing else changed.
        const { [MCP_RECEIPT_META_KEY]: _theirs, ...kept } = (r._meta ?? {}) as Record<string, unknown>;
        expect(bound.result).toEqual(r._meta === undefined ? r : { ...r, _meta: kept });
        const rest = JSON.parse(JSON.stringify({ result: bound.result, receipt: env })) as { result: unknown };
        const mcp = JSON.parse(JSON.stringify(withReceipt(bound.result, env))) as unknown;
        expect(resultSha256(rest.result)).toBe(bound.sha256);
        expect(resultSha256(mcp)).toBe(bound.sha256);
      }),
      { numRuns: 500 },
    );
  });

  test("a _meta that is not an object cannot be bound: the desk does not charge for it", () => {
    for (const m of [null, 5, "x", [], [{ [MCP_RECEIPT_META_KEY]: 1 }]]) expect(bindResult({ content: [], _meta: m })).toBeNull();
  });

  test("an empty _meta hashes as none, and the verifier takes it so on both transports", () => {
    expect(resultSha256({ ...RESULT, _meta: {} })).toBe(resultSha256(RESULT));
    const env = signer.sign(fields({ result_sha256: bindResult({ ...RESULT, _meta: {} })!.sha256 }));
    expect(verdicts(verifyResponse({ result: { ...RESULT, _meta: {} }, receipt: env }, jwks, ARGS))).toEqual(ALL_OK);
    expect(verdicts(verifyResponse(withReceipt({ ...RESULT, _meta: {} }, env), jwks, ARGS))).toEqual(ALL_OK);
  });
});

describe("the shapes a verifier reads", () => {
  const KEYS = ["result", "receipt", "error", "payload", "signature", "kid", "jsonrpc", "id", "_meta", "content", "isError"] as const;
  const env = signer.sign(fields());
  const value = fc.oneof(
    fc.constant(env),
    fc.constant(RESULT),
    fc.constant("2.0"),
    fc.constant({ [MCP_RECEIPT_META_KEY]: env }),
    fc.jsonValue({ maxDepth: 1 }),
  );
  const body = fc.dictionary(fc.constantFrom(...KEYS), value, { maxKeys: 6 });
  const EXACT: Record<string, string[]> = {
    rest: ["receipt", "result"],
    refusal: ["error", "receipt"],
    envelope: ["kid", "payload", "receipt", "signature"],
    jsonrpc: ["id", "jsonrpc", "result"],
  };

  test("property: an exact shape has exactly its keys, an MCP result has our _meta entry, and only a bare envelope skips the result", () => {
    fc.assert(
      fc.property(body, (b) => {
        const read = readShape(b);
        const checks = verifyResponse(b, jwks, ARGS);
        if (!("shape" in read)) {
          expect(checks.map((c) => c.name)).toEqual(["shape"]);
          expect(checks[0]!.ok).toBe(false);
          return;
        }
        const { kind } = read.shape;
        if (kind === "mcp") expect(Object.hasOwn(b._meta as object, MCP_RECEIPT_META_KEY)).toBe(true);
        else expect(Object.keys(b).sort()).toEqual(EXACT[kind]!);
        const result = checks.find((c) => c.name === "result");
        if (result?.skipped) expect(kind).toBe("envelope");
      }),
      { numRuns: 2000 },
    );
  });

  test("a file is one shape at most: the exact shapes hold no _meta, an MCP result must", () => {
    const mcpLike = { ...RESULT, _meta: { [MCP_RECEIPT_META_KEY]: env } };
    expect(readShape({ ...env, _meta: mcpLike._meta })).toMatchObject({ shape: { kind: "mcp" } });
    expect(readShape({ ...env, result: RESULT })).toEqual({
      refused: "not a response verify-receipt reads (top-level keys: kid, payload, receipt, result, signature)",
    });
    expect(readShape({ jsonrpc: "2.0", id: 1, result: mcpLike })).toMatchObject({ shape: { kind: "jsonrpc" } });
    expect(readShape({ jsonrpc: "2.0", id: null, result: mcpLike })).toEqual({ refused: "the JSON-RPC response's id is not a string or a number" });
    expect(readShape({ jsonrpc: "1.0", id: 1, result: mcpLike })).toEqual({ refused: 'a JSON-RPC message whose jsonrpc is not "2.0"' });
    expect(readShape({ ...RESULT, content: "x", _meta: mcpLike._meta })).toEqual({ refused: "the MCP result's content is not an array" });
    expect(readShape({ ...RESULT, isError: "no", _meta: mcpLike._meta })).toEqual({ refused: "the MCP result's isError is not a boolean" });
    expect(readShape({ ...RESULT, _meta: [env] })).toEqual({ refused: "the MCP result's _meta is not an object" });
    expect(readShape("x")).toEqual({ refused: "expected a JSON object, found a string" });
  });
});

describe("printable", () => {
  test("property: it is the recap's escaping, cut after 80 columns (its plain-ASCII shortcut included)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary-ascii", maxLength: 100 }), fc.string({ unit: "binary", maxLength: 100 })), (text) => {
        const rows = displayRows(text, 80, Number.POSITIVE_INFINITY);
        expect(printable(text)).toBe(rows.length > 1 ? `${rows[0]}...` : (rows[0] ?? ""));
      }),
      { numRuns: 5000 },
    );
    expect(printable("\u001b[2J ok\u202e")).toBe("\\u{1b}[2J ok\\u{202e}");
  });
});
