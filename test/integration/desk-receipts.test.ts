// Receipts the desk issues, against the receipt library's verifier: one changed digit of the
// amount, one character of the answer or of the arguments, or another signing key each make
// the matching check fail; the untouched response passes every check.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateSigningKey, type Jwks, jwksOf, verifyResponse } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, type TestDesk } from "./desk-harness.ts";

let fx: UpstreamFixture;
let t: TestDesk;
let jwks: Jwks;
type Body = { result: { content: { text: string }[] }; receipt: { payload: string; signature: string; kid: string; receipt: Record<string, unknown> } };
let body: Body;
const ARGS = { text: "pay for this answer" };

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1234, upstreamCostMc: 0 });
  const k = await t.makeKey({ budget_mc: 10_000, reset: "none", allow: ["fx__echo"] });
  body = (await (await t.call(k.secret, "fx__echo", ARGS)).json()) as Body;
  jwks = (await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json()) as Jwks;
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

const failed = (b: unknown, keys: Jwks, args?: unknown) =>
  verifyResponse(b, keys, args)
    .filter((c) => !c.ok)
    .map((c) => c.name);

describe("desk receipts under tampering", () => {
  test("the response as returned passes every check, arguments included", () => {
    expect(body.receipt.receipt.amount_mc).toBe(1234);
    expect(failed(body, jwks, ARGS)).toEqual([]);
  });

  test("one digit of the amount in the readable copy: readable_copy fails", () => {
    const b = structuredClone(body);
    b.receipt.receipt.amount_mc = 1235;
    expect(failed(b, jwks, ARGS)).toEqual(["readable_copy"]);
  });

  test("one digit of the amount in the signed payload: the signature fails", () => {
    const b = structuredClone(body);
    const text = Buffer.from(b.receipt.payload, "base64url").toString("utf8").replace('"amount_mc":1234', '"amount_mc":1235');
    b.receipt.payload = Buffer.from(text).toString("base64url");
    expect(failed(b, jwks, ARGS)).toContain("signature");
  });

  test("one character of the answer: result fails", () => {
    const b = structuredClone(body);
    b.result.content[0]!.text = "pay for this answeR";
    expect(failed(b, jwks, ARGS)).toEqual(["result"]);
  });

  test("one character of the arguments: params fails", () => {
    expect(failed(body, jwks, { text: "pay for this answeR" })).toEqual(["params"]);
  });

  test("a receipt checked against another desk's key: the signature fails", () => {
    const other = jwksOf(generateSigningKey().publicJwk);
    expect(failed(body, other, ARGS)).toEqual(["signature"]);
  });
});
