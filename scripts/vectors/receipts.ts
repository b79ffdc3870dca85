// Writes test/vectors/receipts/: a JWKS and one .vector file per case, signed with fixed keys
// (the RFC 8037 A.1 test key as the current key, two keys from fixed seeds), so the files are
// the same on every run (Ed25519 signatures are deterministic).
// Run: node_modules/.bin/bun scripts/vectors/receipts.ts
import { createPrivateKey, sign } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  bindResult,
  chainLinkAfter,
  describeCheck,
  type Envelope,
  jwksOf,
  loadSigner,
  MCP_RECEIPT_META_KEY,
  paramsSha256,
  type ReceiptFields,
  resultSha256,
  sha256Hex,
  verifyResponse,
  withReceipt,
} from "../../src/core/receipt/index.ts";
import { formatVector, VECTOR_DIR, VECTOR_JWKS } from "../../test/vectors/receipts/vectors.ts";

function pemFromSeed(seed: Buffer): string {
  const der = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
  return createPrivateKey({ key: der, format: "der", type: "pkcs8" }).export({ format: "pem", type: "pkcs8" }).toString();
}

const current = loadSigner(pemFromSeed(Buffer.from("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A", "base64url")));
const retired = loadSigner(pemFromSeed(Buffer.from(sha256Hex("ask-only receipt vectors: retired key"), "hex")));
const stranger = loadSigner(pemFromSeed(Buffer.from(sha256Hex("ask-only receipt vectors: stranger key"), "hex")));
const jwks = jwksOf(current.publicJwk(), [retired.publicJwk()]);

const ARGS = { city: "Lyon", days: 2, units: "metric" };
const RESULT = {
  content: [{ type: "text", text: "Lyon: 14°C, light rain; tomorrow 11°C" }],
  structuredContent: {
    city: "Lyon",
    forecast: [
      { day: 0, temp_c: 14 },
      { day: 1, temp_c: 11 },
    ],
  },
};

function fields(over: Partial<ReceiptFields> = {}): ReceiptFields {
  return {
    id: "rcpt_0001",
    issued_at: "2026-11-30T09:15:02.417Z",
    org_id: "org_acme",
    key_id: "key_agent7",
    tool: "weather__forecast",
    outcome: "charged",
    http_status: 200,
    price_mc: 2500,
    amount_mc: 2500,
    upstream_cost_mc: 900,
    remaining_mc: 47500,
    period: "2026-11",
    params_sha256: paramsSha256(ARGS),
    result_sha256: resultSha256(RESULT),
    ...chainLinkAfter(null),
    ...over,
  };
}

const refusal = (outcome: "refused_budget" | "refused_org_budget" | "refused_not_allowed", status: number): Partial<ReceiptFields> => ({
  outcome,
  http_status: status,
  amount_mc: 0,
  result_sha256: null,
  remaining_mc: outcome === "refused_budget" ? 1200 : 47500,
});

const charged = current.sign(fields());
const pretty = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;
const compact = (v: unknown) => `${JSON.stringify(v)}\n`;
const withPayload = (env: Envelope, edit: (text: string) => string): Envelope => ({
  ...env,
  payload: Buffer.from(edit(Buffer.from(env.payload, "base64url").toString("utf8"))).toString("base64url"),
});

const mcpResult = { ...RESULT, _meta: { "example.com/trace": "t-77" } };
const mcpCharged = current.sign(fields({ id: "rcpt_0002", result_sha256: resultSha256(mcpResult) }));
const mcpRefusal = {
  content: [{ type: "text", text: '{"error":"TOOL_NOT_ALLOWED"}' }],
  structuredContent: { error: "TOOL_NOT_ALLOWED" },
  isError: true,
};
const stolenKid = (() => {
  const env = stranger.sign(fields());
  const receipt = { ...env.receipt, kid: current.kid };
  const bytes = Buffer.from(JSON.stringify(Object.fromEntries(Object.entries(receipt).sort(([a], [b]) => (a < b ? -1 : 1)))));
  const key = createPrivateKey(pemFromSeed(Buffer.from(sha256Hex("ask-only receipt vectors: stranger key"), "hex")));
  return { payload: bytes.toString("base64url"), signature: sign(null, bytes, key).toString("base64url"), kid: current.kid, receipt };
})();

// An upstream result with an empty _meta, bound as the desk binds it: the receipt covers the
// result without our entry and without the _meta that is then empty, on both transports.
const emptyMeta = { ...RESULT, _meta: {} };
const emptyMetaBound = bindResult(emptyMeta)!;
const emptyMetaCharged = current.sign(fields({ id: "rcpt_0007", result_sha256: emptyMetaBound.sha256 }));
const forgedResult = { content: [{ type: "text", text: "Lyon: 30°C, sunny all week" }] };

type Case = { description: string; args?: unknown; body: string };
const cases: Record<string, Case> = {
  "rest-charged": { description: "a charged REST call, with its arguments", args: ARGS, body: pretty({ result: RESULT, receipt: charged }) },
  "rest-charged-no-args": { description: "the same without --args: params is skipped", body: compact({ result: RESULT, receipt: charged }) },
  "rest-reordered": {
    description: "result and arguments saved with other key orders still verify",
    args: { units: "metric", days: 2, city: "Lyon" },
    body: pretty({
      receipt: charged,
      result: {
        structuredContent: {
          forecast: [
            { temp_c: 14, day: 0 },
            { temp_c: 11, day: 1 },
          ],
          city: "Lyon",
        },
        content: RESULT.content,
      },
    }),
  },
  "rest-refused-budget": {
    description: "a 402 refusal: no result returned, none bound",
    args: ARGS,
    body: pretty({ error: "BUDGET_EXHAUSTED", receipt: current.sign(fields({ id: "rcpt_0003", ...refusal("refused_budget", 402) })) }),
  },
  "rest-refused-org-budget": {
    description: "a 402 refusal for want of the organization's budget (the key had room): no result returned, none bound",
    args: ARGS,
    body: pretty({ error: "BUDGET_EXHAUSTED", receipt: current.sign(fields({ id: "rcpt_0008", ...refusal("refused_org_budget", 402) })) }),
  },
  "rest-refused-not-allowed": {
    description: "a 403 refusal: no result returned, none bound",
    body: pretty({ error: "TOOL_NOT_ALLOWED", receipt: current.sign(fields({ id: "rcpt_0004", ...refusal("refused_not_allowed", 403) })) }),
  },
  "mcp-charged": {
    description: "a saved MCP tools/call result; its other _meta entry is covered by result_sha256",
    args: ARGS,
    body: pretty({ ...mcpResult, _meta: { ...mcpResult._meta, [MCP_RECEIPT_META_KEY]: mcpCharged } }),
  },
  "mcp-refused": {
    description: "an MCP refusal: an isError result with the receipt in _meta, none bound",
    args: ARGS,
    body: pretty({ ...mcpRefusal, _meta: { [MCP_RECEIPT_META_KEY]: current.sign(fields({ id: "rcpt_0005", ...refusal("refused_not_allowed", 403) })) } }),
  },
  "envelope-bare": { description: "a bare envelope, as in the JSONL export: no result to check", args: ARGS, body: compact(charged) },
  "retired-key": {
    description: "signed by a retired key that the JWKS still lists",
    args: ARGS,
    body: pretty({ result: RESULT, receipt: retired.sign(fields({ id: "rcpt_0006" })) }),
  },
  "tamper-readable-amount": {
    description: "one digit of amount_mc changed in the readable copy",
    args: ARGS,
    body: pretty({ result: RESULT, receipt: { ...charged, receipt: { ...charged.receipt, amount_mc: 2900 } } }),
  },
  "tamper-payload-amount": {
    description: "one digit of amount_mc changed in the signed payload",
    args: ARGS,
    body: pretty({ result: RESULT, receipt: withPayload(charged, (t) => t.replace('"amount_mc":2500', '"amount_mc":2000')) }),
  },
  "tamper-answer": {
    description: "one character of the answer changed",
    args: ARGS,
    body: pretty({ result: { ...RESULT, content: [{ type: "text", text: "Lyon: 15°C, light rain; tomorrow 11°C" }] }, receipt: charged }),
  },
  "tamper-args": { description: "one character of the arguments changed", args: { ...ARGS, city: "Lyom" }, body: pretty({ result: RESULT, receipt: charged }) },
  "other-key": {
    description: "signed by a key that is not in the JWKS",
    args: ARGS,
    body: pretty({ result: RESULT, receipt: stranger.sign(fields()) }),
  },
  "unknown-kid": {
    description: "the envelope names a kid the JWKS does not hold",
    args: ARGS,
    body: pretty({ result: RESULT, receipt: { ...charged, kid: "Zm9yZ2VkLWtpZA" } }),
  },
  "stolen-kid": {
    description: "another key's signature presented under the current kid",
    args: ARGS,
    body: pretty({ result: RESULT, receipt: stolenKid }),
  },
  "no-receipt": { description: "a body that holds no receipt at all", body: pretty({ result: RESULT }) },
  "jsonrpc-charged": {
    description: "the whole JSON-RPC response that carried a charged MCP result",
    args: ARGS,
    body: pretty({ jsonrpc: "2.0", id: 7, result: { ...mcpResult, _meta: { ...mcpResult._meta, [MCP_RECEIPT_META_KEY]: mcpCharged } } }),
  },
  "mcp-empty-meta": {
    description: "an upstream result with _meta: {} as the agent gets it over MCP: _meta holds only the receipt",
    args: ARGS,
    body: pretty(withReceipt(emptyMetaBound.result, emptyMetaCharged)),
  },
  "rest-empty-meta": {
    description: "the same upstream result over REST: its empty _meta stays, and is hashed as no _meta",
    args: ARGS,
    body: pretty({ result: emptyMetaBound.result, receipt: emptyMetaCharged }),
  },
  "envelope-bare-refusal": {
    description: "a bare envelope of a refusal: it binds no result, so the result check runs and passes",
    body: compact(current.sign(fields({ id: "rcpt_0003", ...refusal("refused_budget", 402) }))),
  },
  "forged-envelope-with-result": {
    description: "a real envelope with a forged result beside it: no shape, refused",
    args: ARGS,
    body: pretty({ ...charged, result: forgedResult }),
  },
  "forged-jsonrpc-merged": {
    description: "a JSON-RPC response whose result is a forged answer merged with the envelope's fields: refused",
    args: ARGS,
    body: pretty({ jsonrpc: "2.0", id: 1, result: { ...forgedResult, ...charged, _meta: {} } }),
  },
  "forged-jsonrpc-merged-no-meta": {
    description: "the same without _meta: refused",
    args: ARGS,
    body: pretty({ jsonrpc: "2.0", id: 1, result: { ...forgedResult, ...charged } }),
  },
  "forged-mcp-envelope-fields": {
    description: "a forged MCP result that holds the real receipt and the envelope's fields: the result check fails",
    args: ARGS,
    body: pretty({ ...forgedResult, ...charged, _meta: { [MCP_RECEIPT_META_KEY]: mcpCharged } }),
  },
  "rest-two-receipts": {
    description: "a REST body whose result also holds _meta[io.ask-only/receipt]: ambiguous, refused",
    args: ARGS,
    body: pretty({ result: { ...RESULT, _meta: { [MCP_RECEIPT_META_KEY]: charged } }, receipt: charged }),
  },
  "refusal-extra-result": {
    description: "a refusal body with a result added: no shape, refused",
    body: pretty({ error: "BUDGET_EXHAUSTED", result: forgedResult, receipt: current.sign(fields({ id: "rcpt_0003", ...refusal("refused_budget", 402) })) }),
  },
  "jsonrpc-error": {
    description: "a JSON-RPC error response: no receipt, refused",
    body: pretty({ jsonrpc: "2.0", id: 1, error: { code: -32601, message: "no" } }),
  },
  "mcp-no-receipt": { description: "an MCP result whose _meta holds no receipt: refused", body: pretty({ ...RESULT, _meta: { "example.com/trace": "t-77" } }) },
  "not-an-object": { description: "a JSON array: refused", body: compact([charged]) },
};

writeFileSync(VECTOR_JWKS, pretty(jwks));
for (const [name, c] of Object.entries(cases)) {
  const checks = verifyResponse(JSON.parse(c.body), jwks, c.args);
  const vector = {
    description: c.description,
    ...(c.args === undefined ? {} : { args: JSON.stringify(c.args) }),
    exit: (checks.every((x) => x.ok) ? 0 : 1) as 0 | 1,
    stdout: checks.map(describeCheck),
    body: c.body,
  };
  writeFileSync(join(VECTOR_DIR, `${name}.vector`), formatVector(vector));
}
console.error(`wrote ${Object.keys(cases).length} vectors and jwks.json to ${VECTOR_DIR}`);
