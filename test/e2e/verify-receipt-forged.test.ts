// Forged answers built from real desk responses (the compiled desk, a real upstream, a paid call
// over REST and over MCP) against all three verifiers at once: the library, the compiled
// `ask-only verify-receipt`, and the console's WebCrypto module. Each forgery must fail in all
// three with the same lines; the genuine files they were made from must pass in all three.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describeCheck, type Jwks, MCP_RECEIPT_META_KEY, SHAPES_READ, verifyResponse } from "../../src/core/receipt/index.ts";
import { importJwksWeb, verifyResponseWeb } from "../../src/core/receipt/verify-web.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { runBinary } from "../helpers/binary.ts";
import { type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

type Json = Record<string, unknown>;

let fx: UpstreamFixture;
let tmp: ReturnType<typeof tempDir>;
let desk: DeskProcess;
let jwks: Jwks;
let jwksPath: string;
const ARGS = { text: "the genuine answer" };
const FORGED = { content: [{ type: "text", text: "a forged answer nobody paid for" }] };
/** What the desk answered: a charged REST body, a charged MCP JSON-RPC response, a 403 refusal. */
const real: { rest: Json; rpc: Json; refusal: Json } = { rest: {}, rpc: {}, refusal: {} };

beforeAll(async () => {
  fx = startUpstreamFixture();
  tmp = tempDir("verify-forged-");
  desk = await startDeskProcess(join(tmp.path, "data"));
  expect((await desk.admin("POST", "/admin/upstreams", { name: "fx", url: fx.url })).status).toBe(201);
  expect((await desk.admin("PUT", "/admin/tools/fx__echo", { price_mc: 1500, upstream_cost_mc: 500 })).status).toBe(200);
  const org = (await (await desk.admin("POST", "/admin/orgs", { name: "agents" })).json()) as { org_id: string };
  const key = await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 100_000, reset: "none", allow: ["fx__echo"] });
  const secret = ((await key.json()) as { secret: string }).secret;
  const headers = { authorization: `Bearer ${secret}`, "content-type": "application/json" };

  const rest = await fetch(`${desk.url}/v1/tools/fx__echo`, { method: "POST", headers, body: JSON.stringify(ARGS) });
  expect(rest.status).toBe(200);
  real.rest = (await rest.json()) as Json;
  const rpc = await fetch(`${desk.url}/mcp`, {
    method: "POST",
    headers: { ...headers, accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "fx__echo", arguments: ARGS } }),
  });
  expect(rpc.status).toBe(200);
  real.rpc = (await rpc.json()) as Json;
  const refused = await fetch(`${desk.url}/v1/tools/fx__add`, { method: "POST", headers, body: JSON.stringify({ a: 1, b: 2 }) });
  expect(refused.status).toBe(403);
  real.refusal = (await refused.json()) as Json;

  jwks = (await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).json()) as Jwks;
  jwksPath = join(tmp.path, "jwks.json");
  writeFileSync(jwksPath, JSON.stringify(jwks));
});

afterAll(async () => {
  expect(await desk.stop()).toBe(0);
  await fx.stop();
  tmp[Symbol.dispose]();
});

const restEnvelope = () => real.rest.receipt as Json;
const mcpResult = () => real.rpc.result as Json;

/** The three verifiers on one file: the lines each prints, and the binary's exit code and stderr. */
async function verifyAll(name: string, body: unknown, args?: unknown) {
  const file = join(tmp.path, `${name}.json`);
  writeFileSync(file, `${JSON.stringify(body, null, 2)}\n`);
  const argv = ["verify-receipt", file, "--keys", jwksPath];
  if (args !== undefined) {
    writeFileSync(join(tmp.path, `${name}.args.json`), JSON.stringify(args));
    argv.push("--args", join(tmp.path, `${name}.args.json`));
  }
  const bin = await runBinary(argv);
  const library = verifyResponse(body, jwks, args).map(describeCheck);
  const web = (await verifyResponseWeb(body, await importJwksWeb(jwks), args)).map(describeCheck);
  return { file, bin, library, web };
}

describe("the genuine responses the forgeries start from pass everywhere", () => {
  test.each(["rest", "rpc", "mcp-result", "refusal", "envelope"] as const)("%s", async (kind) => {
    const body = { rest: real.rest, rpc: real.rpc, "mcp-result": mcpResult(), refusal: real.refusal, envelope: restEnvelope() }[kind];
    const args = kind === "refusal" ? { a: 1, b: 2 } : ARGS;
    const { bin, library, web } = await verifyAll(`genuine-${kind}`, body, args);
    expect(bin.code).toBe(0);
    expect(bin.stderr).toBe("");
    expect(bin.stdout).toBe(`${library.join("\n")}\n`);
    expect(web).toEqual(library);
    expect(library.some((l) => l.startsWith("FAILED"))).toBe(false);
  });
});

// Each forgery and the first line it must fail with.
const forgeries: [string, () => unknown, string][] = [
  [
    "a real envelope with a forged result beside it",
    () => ({ ...restEnvelope(), result: FORGED }),
    "FAILED shape: not a response verify-receipt reads (top-level keys: kid, payload, receipt, result, signature)",
  ],
  [
    "a JSON-RPC response whose result is a forged answer merged with the envelope's fields and an empty _meta",
    () => ({ ...real.rpc, result: { ...FORGED, ...restEnvelope(), _meta: {} } }),
    `FAILED shape: the JSON-RPC response's result holds no _meta["${MCP_RECEIPT_META_KEY}"]`,
  ],
  [
    "the same merge without _meta",
    () => ({ ...real.rpc, result: { ...FORGED, ...restEnvelope() } }),
    `FAILED shape: the JSON-RPC response's result holds no _meta["${MCP_RECEIPT_META_KEY}"]`,
  ],
  [
    "a forged MCP answer carrying the real MCP receipt and the envelope's fields",
    () => ({ ...real.rpc, result: { ...FORGED, ...restEnvelope(), _meta: mcpResult()._meta } }),
    "FAILED result: result_sha256 differs",
  ],
  ["a forged MCP answer under the real receipt", () => ({ ...FORGED, _meta: mcpResult()._meta }), "FAILED result: result_sha256 differs"],
  [
    "a REST body whose result also carries the receipt in _meta",
    () => ({ result: { ...FORGED, _meta: { [MCP_RECEIPT_META_KEY]: restEnvelope() } }, receipt: restEnvelope() }),
    `FAILED shape: ambiguous: a REST body whose result also holds _meta["${MCP_RECEIPT_META_KEY}"]`,
  ],
  [
    "a refusal body with a forged result added",
    () => ({ ...real.refusal, result: FORGED }),
    "FAILED shape: not a response verify-receipt reads (top-level keys: error, receipt, result)",
  ],
  [
    "a forged answer under a refusal's receipt (REST)",
    () => ({ result: FORGED, receipt: real.refusal.receipt }),
    "FAILED result: the response holds a result but result_sha256 is null",
  ],
  [
    "a forged answer under a refusal's receipt (MCP)",
    () => ({ ...FORGED, _meta: { [MCP_RECEIPT_META_KEY]: real.refusal.receipt } }),
    "FAILED result: the response holds a result but result_sha256 is null",
  ],
  [
    "a charged receipt presented as a refusal",
    () => ({ error: "BUDGET_EXHAUSTED", receipt: restEnvelope() }),
    "FAILED result: result_sha256 is set but the response holds no result",
  ],
  [
    "an envelope with an extra key",
    () => ({ ...restEnvelope(), verified: true }),
    "FAILED shape: not a response verify-receipt reads (top-level keys: kid, payload, receipt, signature, verified)",
  ],
];

describe("forged answers fail in the library, the binary and the browser module alike", () => {
  test.each(forgeries)("%s", async (name, forge, firstFailure) => {
    const { file, bin, library, web } = await verifyAll(name.replace(/\W+/g, "-"), forge(), ARGS);
    expect(library.find((l) => l.startsWith("FAILED"))).toBe(firstFailure);
    expect(web).toEqual(library);
    expect(bin.stdout).toBe(`${library.join("\n")}\n`);
    expect(bin.code).toBe(1);
    const failed = library.filter((l) => l.startsWith("FAILED")).length;
    expect(bin.stderr).toBe(
      firstFailure.startsWith("FAILED shape:")
        ? `ask-only: error: ${file} is not a response verify-receipt reads\nask-only: hint: it should hold ${SHAPES_READ}\n`
        : `ask-only: error: the receipt did not verify (${failed} ${failed === 1 ? "check" : "checks"} failed)\n`,
    );
  });
});

describe("a check the file calls for is never a pass by being skipped", () => {
  test("only a bare envelope skips the result, and only --args missing skips params", async () => {
    for (const [kind, body] of [
      ["rest", real.rest],
      ["rpc", real.rpc],
      ["mcp-result", mcpResult()],
      ["refusal", real.refusal],
    ] as const) {
      const lines = verifyResponse(body, jwks, kind === "refusal" ? { a: 1, b: 2 } : ARGS).map(describeCheck);
      expect(`${kind}: ${lines.filter((l) => l.startsWith("skip")).join("; ")}`).toBe(`${kind}: `);
    }
    expect(verifyResponse(restEnvelope(), jwks).map(describeCheck)).toEqual([
      `ok   signature (kid ${jwks.keys[0]!.kid})`,
      "ok   readable copy",
      "skip result (a bare envelope carries no result: the answer is not checked)",
      "skip params (no arguments given)",
    ]);
  });
});
