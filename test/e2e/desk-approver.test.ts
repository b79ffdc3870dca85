// One product, as its people meet it: the compiled desk linked over mutual TLS to a compiled
// approver, with certificates `ask-only certs` made, a person typing on the approver's
// pseudo-terminal, agents over REST and over MCP. Below the threshold a call clears at once;
// above it the desk answers 202 and waits; approved, the call is charged and its receipt (v2)
// passes `verify-receipt` with the desk's and the approver's key sets, offline; denied and
// expired are refunded with receipts that pass too; other arguments and a second use are 409
// with no upstream call; 20 concurrent repeats charge once; the approver down → 503, nothing
// reserved. The decision bound into the receipt names the SHA-256 of the recap bytes the test
// read from the terminal.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { readDecisionPayload } from "../../src/core/decision/binding.ts";
import type { Envelope } from "../../src/core/receipt/index.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { startTtyApprover, type TtyApprover } from "../helpers/approver-tty.ts";
import { runBinary } from "../helpers/binary.ts";
import { adminJson, callTool, type DeskProcess, startDeskProcess, tryStartDeskWith } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

const PRICE = 5000;
const TTL_S = 8;
const tmp = tempDir("desk-approver-e2e-");
const certs = { link: join(tmp.path, "link"), desk: join(tmp.path, "desk-certs") };
const file = (dir: string, name: string) => join(dir, name);
let fx: UpstreamFixture;
let ap: TtyApprover;
let desk: DeskProcess;
let secret: string;
let keyId: string;
let deskKeysPath: string;
const approverKeysPath = join(tmp.path, "approver-keys.json");
let approverArgs: string[];
let deskArgs: string[];

beforeAll(async () => {
  fx = startUpstreamFixture();
  for (const args of [
    ["certs", certs.link],
    ["certs", certs.desk, "--desk"],
  ])
    expect((await runBinary(args)).code).toBe(0);
  const db = join(tmp.path, "state", "asks.db");
  approverArgs = [
    "approver",
    "--cert",
    file(certs.link, "approver.pem"),
    "--key",
    file(certs.link, "approver.key"),
    "--ca",
    file(certs.link, "client-ca.pem"),
    "--listen",
    "127.0.0.1:0",
    "--desk-listen",
    "127.0.0.1:0",
    "--desk-ca",
    file(certs.desk, "desk-ca.pem"),
    "--db",
    db,
    "--ttl",
    `${TTL_S}s`,
  ];
  ap = await startTtyApprover({ args: approverArgs, columns: 100 });
  const keys = await runBinary(["approver", "--print-decision-keys", "--db", db]);
  expect(keys.code).toBe(0);
  writeFileSync(approverKeysPath, keys.stdout);
  deskArgs = [
    "--approver",
    `https://localhost:${ap.deskPort}`,
    "--approver-cert",
    file(certs.desk, "desk.pem"),
    "--approver-key",
    file(certs.desk, "desk.key"),
    "--approver-ca",
    file(certs.link, "approver-ca.pem"),
    "--approver-keys",
    approverKeysPath,
  ];
  desk = await startDeskProcess(join(tmp.path, "data"), deskArgs);
  expect(desk.stderr()).toContain(`approver: https://localhost:${ap.deskPort}/`);
  await adminJson(desk, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
  await adminJson(desk, "PUT", "/admin/tools/fx__echo", { price_mc: PRICE, upstream_cost_mc: 1000 });
  await adminJson(desk, "PUT", "/admin/tools/fx__add", { price_mc: 100, upstream_cost_mc: 0 });
  const org = await adminJson(desk, "POST", "/admin/orgs", { name: "acme" });
  const key = await adminJson(desk, "POST", "/admin/keys", {
    org_id: org.org_id,
    name: "research-agent",
    budget_mc: 1_000_000,
    reset: "none",
    allow: ["fx__echo", "fx__add"],
    approve_above_mc: 1000,
  });
  secret = key.secret as string;
  keyId = key.key_id as string;
  deskKeysPath = join(tmp.path, "desk-keys.json");
  writeFileSync(deskKeysPath, await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
}, 60_000);

afterAll(async () => {
  await desk?.stop();
  await ap?.stop();
  await fx?.stop();
  tmp[Symbol.dispose]();
});

function repeat(tool: string, args: unknown, approvalId: string): Promise<Response> {
  return fetch(`${desk.url}/v1/tools/${tool}`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": "application/json", "x-clearing-approval": approvalId },
    body: JSON.stringify(args),
  });
}

const spent = async () => (await adminJson(desk, "GET", `/admin/keys/${keyId}`)).spent_mc as number;

/** A call above the threshold: 202, and its recap on the person's terminal. */
async function waitingCall(args: Record<string, unknown>): Promise<{ id: string; expiresAt: string }> {
  const at = ap.screen.text.length;
  const before = fx.totalCalls();
  const r = await callTool(desk.url, secret, "fx__echo", args);
  expect(r.status).toBe(202);
  const body = (await r.json()) as { error: string; approval_id: string; expires_at: string };
  expect(body.error).toBe("APPROVAL_PENDING");
  expect(r.headers.get("x-clearing-approval-id")).toBe(body.approval_id);
  expect(fx.totalCalls()).toBe(before);
  const id = body.approval_id;
  await ap.screen.waitFor(new RegExp(`approve ${id}   or   deny ${id}\\r\\n`), at);
  return { id, expiresAt: body.expires_at };
}

/** The person types `verb ID` and the console confirms it. */
async function decide(verb: "approve" | "deny", id: string): Promise<void> {
  const at = ap.type(`${verb} ${id}`);
  await ap.screen.waitFor(new RegExp(`${id}: ${verb === "approve" ? "approved" : "denied"}: SPEND`), at);
}

/** `verify-receipt` on a saved response, with both key sets (offline: files only). */
async function verifyOffline(name: string, body: unknown, args: unknown, approverKeys = approverKeysPath) {
  const response = join(tmp.path, `${name}.json`);
  const argsFile = join(tmp.path, `${name}-args.json`);
  writeFileSync(response, JSON.stringify(body));
  writeFileSync(argsFile, JSON.stringify(args));
  return runBinary(["verify-receipt", response, "--keys", deskKeysPath, "--args", argsFile, "--approver-keys", approverKeys]);
}

let expiring: { id: string; expiresAt: string; args: Record<string, unknown> };

describe("a desk and an approver linked by `ask-only certs`", () => {
  test("below the threshold a call clears at once; above it the desk answers 202, reserves the price and the person sees the ask", async () => {
    // Made first: this one nobody decides, and the last test repeats it after its expiry.
    expiring = { args: { text: "nobody decides this" }, ...(await waitingCall({ text: "nobody decides this" })) };
    const small = await callTool(desk.url, secret, "fx__add", { a: 1, b: 2 });
    expect(small.status).toBe(200);
    expect(((await small.json()) as { receipt: Envelope }).receipt.receipt.v).toBe(1);
    expect(await spent()).toBe(PRICE + 100);
    const shown = ap.screen.lastRecapBytes(expiring.id).toString("utf8");
    expect(shown).toContain(`[ask ${expiring.id}] SPEND 5,000 mc (5 cents)`);
    expect(shown).toContain("  key:       research-agent");
    expect(shown).toContain('  args:      (from the agent, unchecked) {"text":"nobody decides this"}');
    expect(shown).toContain("  asked by:  the desk");
  });

  test("approved on the terminal: the repeat is charged, its receipt binds the signed decision on the recap shown, and verifies offline with both key sets", async () => {
    const args = { text: "buy the dataset" };
    const { id } = await waitingCall(args);
    const pending = await repeat("fx__echo", args, id);
    expect(pending.status).toBe(202);
    const recap = ap.screen.lastRecapBytes(id);
    await decide("approve", id);
    const before = fx.totalCalls();
    const r = await repeat("fx__echo", args, id);
    expect(r.status).toBe(200);
    expect(fx.totalCalls()).toBe(before + 1);
    const body = (await r.json()) as { result: unknown; receipt: Envelope };
    expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "charged", amount_mc: PRICE, key_id: keyId });
    const decision = readDecisionPayload(body.receipt.receipt.approval!.payload);
    if ("problem" in decision) throw new Error(decision.problem);
    expect(decision.record).toMatchObject({ approval_id: id, verb: "spend", decision: "approved", recap_sha256: sha256Hex(recap) });
    const v = await verifyOffline("approved", body, args);
    expect(v.stdout).toContain("ok   approver signature");
    expect(v.stdout).toContain(`ok   approval (${id} approved by a person, for this call`);
    expect(v.code).toBe(0);
    // The desk's own key set is not the approver's: the decision does not verify under it.
    expect((await verifyOffline("approved-wrong-keys", body, args, deskKeysPath)).code).toBe(1);

    // One use; other arguments are no use either: 409, the upstream not called.
    const calls = fx.totalCalls();
    const again = await repeat("fx__echo", args, id);
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: string }).error).toBe("APPROVAL_USED");
    expect(fx.totalCalls()).toBe(calls);
  });

  test("other arguments than the approved ones: 409 APPROVAL_MISMATCH, no upstream call, nothing charged", async () => {
    const args = { text: "the approved text" };
    const { id } = await waitingCall(args);
    await decide("approve", id);
    const before = { calls: fx.totalCalls(), spent: await spent() };
    const r = await repeat("fx__echo", { text: "a different text" }, id);
    expect(r.status).toBe(409);
    expect(((await r.json()) as { error: string }).error).toBe("APPROVAL_MISMATCH");
    expect({ calls: fx.totalCalls(), spent: await spent() }).toEqual(before);
  });

  test("denied on the terminal: 403 APPROVAL_DENIED, refunded with a refunded_denied receipt that verifies offline", async () => {
    const args = { text: "deny this one" };
    const { id } = await waitingCall(args);
    const before = await spent();
    await decide("deny", id);
    const r = await repeat("fx__echo", args, id);
    expect(r.status).toBe(403);
    const body = (await r.json()) as { error: string; receipt: Envelope };
    expect(body.error).toBe("APPROVAL_DENIED");
    expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "refunded_denied", amount_mc: 0 });
    expect(await spent()).toBe(before - PRICE);
    const v = await verifyOffline("denied", body, args);
    expect(v.code).toBe(0);
  });

  test("20 concurrent repeats of one approved call: one is charged, the upstream called once", async () => {
    const args = { text: "twenty at once" };
    const { id } = await waitingCall(args);
    await decide("approve", id);
    const before = { calls: fx.totalCalls(), spent: await spent() };
    const answers = await Promise.all(Array.from({ length: 20 }, () => repeat("fx__echo", args, id)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, ...Array(19).fill(409)]);
    expect(fx.totalCalls()).toBe(before.calls + 1);
    expect(await spent()).toBe(before.spent);
  });

  test("over MCP: tools/call answers APPROVAL_PENDING; approved, the repeat with _meta[io.ask-only/approval] is charged with a receipt v2", async () => {
    const client = new Client({ name: "approval-agent", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${desk.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${secret}` } } }));
    try {
      // The agent's model reads, on the tool, that its calls wait for a person and how to repeat them.
      const listed = (await client.listTools()).tools;
      expect(listed.find((x) => x.name === "fx__echo")!.description).toContain('repeat the same call with _meta["io.ask-only/approval"]');
      expect(listed.find((x) => x.name === "fx__add")!.description).not.toContain("approves");
      const args = { text: "over mcp" };
      const at = ap.screen.text.length;
      const first = (await client.callTool({ name: "fx__echo", arguments: args })) as { isError?: boolean; structuredContent?: Record<string, unknown> };
      expect(first.isError).toBe(true);
      expect(first.structuredContent?.error).toBe("APPROVAL_PENDING");
      const id = first.structuredContent!.approval_id as string;
      await ap.screen.waitFor(new RegExp(`approve ${id}   or   deny ${id}\\r\\n`), at);
      await decide("approve", id);
      const paid = (await client.callTool({ name: "fx__echo", arguments: args, _meta: { "io.ask-only/approval": id } })) as {
        isError?: boolean;
        _meta?: Record<string, unknown>;
      };
      expect(paid.isError).toBeFalsy();
      const receipt = paid._meta?.["io.ask-only/receipt"] as Envelope;
      expect(receipt.receipt).toMatchObject({ v: 2, outcome: "charged" });
      expect((await verifyOffline("mcp", paid, args)).code).toBe(0);
    } finally {
      await client.close();
    }
  });

  test("a desk killed with SIGKILL while a call waits: the restart keeps the reservation, and the approved repeat is charged", async () => {
    const args = { text: "across a crash" };
    const { id } = await waitingCall(args);
    const before = await spent();
    expect(await desk.kill()).not.toBe(0);
    desk = await startDeskProcess(join(tmp.path, "data"), deskArgs);
    // The start-up sweep refunds calls in flight, not calls that wait for a person.
    expect(await spent()).toBe(before);
    await decide("approve", id);
    const r = await repeat("fx__echo", args, id);
    expect(r.status).toBe(200);
    const body = (await r.json()) as { receipt: Envelope };
    expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "charged" });
    expect((await verifyOffline("after-crash", body, args)).code).toBe(0);
    expect(await spent()).toBe(before);
  });

  test("expired undecided: 403 APPROVAL_EXPIRED, refunded with a refunded_expired receipt that verifies offline", async () => {
    const wait = Date.parse(expiring.expiresAt) - Date.now() + 10;
    // The event is the ask's expiry on the approver's clock: wait for that moment, not a guess.
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const before = await spent();
    const r = await repeat("fx__echo", expiring.args, expiring.id);
    expect(r.status).toBe(403);
    const body = (await r.json()) as { error: string; receipt: Envelope };
    expect(body.error).toBe("APPROVAL_EXPIRED");
    expect(body.receipt.receipt).toMatchObject({ v: 2, outcome: "refunded_expired" });
    expect(await spent()).toBe(before - PRICE);
    expect((await verifyOffline("expired", body, expiring.args)).code).toBe(0);
  }, 40_000);

  test("the approver down: a call above the threshold is 503 APPROVER_UNAVAILABLE with nothing reserved; below it clears", async () => {
    expect(await ap.stop()).toBe(0);
    const before = await spent();
    const r = await callTool(desk.url, secret, "fx__echo", { text: "nobody to ask" });
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ error: "APPROVER_UNAVAILABLE" });
    expect(await spent()).toBe(before);
    expect((await callTool(desk.url, secret, "fx__add", { a: 2, b: 2 })).status).toBe(200);
    expect(await spent()).toBe(before + 100);
    // The ledger holds together after all of it: spend = charges + open reservations, every chain and signature.
    const check = await runBinary(["desk", "check", "--data", join(tmp.path, "data")]);
    expect({ code: check.code, failed: check.stdout.split("\n").filter((l) => l.startsWith("FAILED")) }).toEqual({ code: 0, failed: [] });
  });
});

describe("the link's files stop the desk before it serves", () => {
  test("the five settings from the environment link the desk as the flags do; a bad file is named by its variable", async () => {
    const flag = (name: string) => deskArgs[deskArgs.indexOf(name) + 1]!;
    const env = {
      ASK_ONLY_DESK_APPROVER_URL: flag("--approver"),
      ASK_ONLY_DESK_APPROVER_CERT: flag("--approver-cert"),
      ASK_ONLY_DESK_APPROVER_KEY: flag("--approver-key"),
      ASK_ONLY_DESK_APPROVER_CA: flag("--approver-ca"),
      ASK_ONLY_DESK_APPROVER_KEYS: flag("--approver-keys"),
    };
    const linked = await startDeskProcess(join(tmp.path, "data-env"), [], {
      env: { ASK_ONLY_DESK_ADMIN_TOKEN: "reliability-admin-token-0123456789abcdefghijklmnop", ...env },
    });
    expect(linked.stderr()).toContain(`approver: https://localhost:${ap.deskPort}/ (trusting`);
    expect(linked.stderr()).toContain(`(${approverKeysPath})`);
    expect(await linked.stop()).toBe(0);
    const bad = await tryStartDeskWith(join(tmp.path, "data-env"), [], { ...env, ASK_ONLY_DESK_APPROVER_CA: file(certs.desk, "desk-ca.pem") });
    expect({ code: bad.code, named: bad.stderr.includes("(ASK_ONLY_DESK_APPROVER_CA)") }).toEqual({ code: 1, named: true });
  });

  test("a missing file, a wrong CA, some of the five and a decision key set that is none: exit before listening, naming the file", async () => {
    const data = join(tmp.path, "data-bad");
    const withArg = (flag: string, value: string) => deskArgs.map((a, i) => (deskArgs[i - 1] === flag ? value : a));
    const notJwks = join(tmp.path, "not-jwks.json");
    writeFileSync(notJwks, '{"keys": [{"kty": "RSA"}]}');
    const cases: [string[], number, RegExp][] = [
      [withArg("--approver-cert", join(tmp.path, "missing.pem")), 1, /cannot read the certificate .*missing\.pem \(--approver-cert\): ENOENT/],
      [withArg("--approver-ca", file(certs.desk, "desk-ca.pem")), 1, /desk-ca\.pem \(--approver-ca\) is the CA that signed/],
      [withArg("--approver-keys", notJwks), 1, /not-jwks\.json \(--approver-keys\) is not the approver's decision key set/],
      [withArg("--approver", "http://localhost:1"), 2, /is not an https URL/],
      [deskArgs.slice(0, 4), 2, /--approver-key, --approver-ca, --approver-keys missing/],
    ];
    for (const [args, code, message] of cases) {
      const r = await tryStartDeskWith(data, args);
      expect({ code: r.code, matches: message.test(r.stderr) }).toEqual({ code, matches: true });
    }
  });
});
