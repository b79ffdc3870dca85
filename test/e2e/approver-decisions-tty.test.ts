// A person deciding on the approver's terminal: the compiled binary on Bun's pseudo-terminal,
// asks from an agent (client.pem, the agents' listener) and from the desk (desk.pem, the desk's
// listener). Each decision's signed record must carry the SHA-256 of exactly the bytes the test
// read from the terminal for that ask's last recap (SPEC 7.1, "the shown recap"), through a
// `show` that rendered it again, and through a terminal too narrow to decide on.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openDecision } from "../../src/core/decision/verify.ts";
import { mintApprovalId } from "../../src/core/ids.ts";
import { canonicalJson } from "../../src/core/receipt/canonical.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";
import { ReceiptKeys } from "../../src/core/receipt/verify.ts";
import { startTtyApprover, type TtyApprover } from "../helpers/approver-tty.ts";
import { runBinary } from "../helpers/binary.ts";
import { makeDeskPems, makeLinkPems, writeDeskPems, writeLinkPems } from "../helpers/certs.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";
import { tempDir } from "../helpers/tmp.ts";

const dir = tempDir("ask-only-decisions-tty-");
const db = join(dir.path, "state", "asks.db");
let ap: TtyApprover;
let agentTls: { cert: string; key: string; ca: string };
let deskTls: { cert: string; key: string; ca: string };

beforeAll(async () => {
  const link = writeLinkPems(dir.path, await makeLinkPems());
  const desk = writeDeskPems(dir.path, await makeDeskPems());
  const read = (p: string) => Bun.file(p).text();
  agentTls = { cert: await read(link.clientCert), key: await read(link.clientKey), ca: await read(link.approverCa) };
  deskTls = { cert: await read(desk.deskCert), key: await read(desk.deskKey), ca: await read(link.approverCa) };
  ap = await startTtyApprover({
    args: [
      "approver",
      "--cert",
      link.approverCert,
      "--key",
      link.approverKey,
      "--ca",
      link.clientCa,
      "--listen",
      "127.0.0.1:0",
      "--desk-listen",
      "127.0.0.1:0",
      "--desk-ca",
      desk.deskCa,
      "--db",
      db,
      "--ttl",
      "61s",
    ],
    columns: 100,
  });
}, 30_000);
afterAll(async () => {
  await ap?.stop();
  dir[Symbol.dispose]();
});

const agentUrl = () => `https://localhost:${ap.port}`;
const deskUrl = () => `https://localhost:${ap.deskPort}`;

async function postJson(url: string, tls: object, body: unknown) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), tls } as RequestInit);
  expect(res.status).toBe(201);
  return (await res.json()) as { approval_id: string; expires_at: string };
}

/** A pay ask as an agent's serve-mcp sends it; resolves once its recap is on the terminal. */
async function payAsk(): Promise<{ id: string; expiresAt: string }> {
  const at = ap.screen.text.length;
  const made = await postJson(`${agentUrl()}/v1/asks/pay`, agentTls, { approval_id: mintApprovalId(), ...PAY_FIELDS, reason: "renew the domain" });
  await ap.screen.waitFor(new RegExp(`approve ${made.approval_id}   or   deny ${made.approval_id}\\r\\n`), at);
  return { id: made.approval_id, expiresAt: made.expires_at };
}

async function decisionRecord(url: string, tls: object, id: string) {
  const res = await fetch(`${url}/v1/asks/${id}/decision`, { tls } as RequestInit);
  expect(res.status).toBe(200);
  return res.json();
}

let keys: ReceiptKeys;
const approverKeys = async () => {
  if (!keys) {
    const r = await runBinary(["approver", "--print-decision-keys", "--db", db]);
    expect(r.code).toBe(0);
    keys = ReceiptKeys.fromJwks(JSON.parse(r.stdout));
  }
  return keys;
};

/** The record verifies under the approver's printed keys; returns what it signed. */
async function verified(envelope: unknown) {
  const opened = openDecision(envelope, await approverKeys());
  expect(opened.checks.map((c) => c.ok)).toEqual([true, true]);
  return opened.signed!;
}

async function untilPast(ms: number): Promise<void> {
  const wait = ms - Date.now() + 5;
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}

describe("the signed decision names the recap the person had on the screen", () => {
  test("approve: recap_sha256 is the SHA-256 of the recap's bytes as the terminal showed them", async () => {
    const { id } = await payAsk();
    const shown = ap.screen.lastRecapBytes(id);
    expect(shown.toString("utf8")).toStartWith(`[ask ${id}] PAY 19.00 EUR\n  to:        Example Shop\n`);
    const at = ap.type(`approve ${id.toLowerCase()}`);
    await ap.screen.waitFor(new RegExp(`${id}: approved: PAY 19\\.00 EUR at shop\\.example`), at);
    const record = await verified(await decisionRecord(agentUrl(), agentTls, id));
    expect(record).toMatchObject({ approval_id: id, verb: "pay", decision: "approved", recap_sha256: sha256Hex(shown) });
    expect(record.ref).toMatch(/^demo-[0-9a-f]{8}$/);
  });

  test("a `show` in between: the record names the last recap written, not the first", async () => {
    const { id, expiresAt } = await payAsk();
    const first = ap.screen.lastRecapBytes(id);
    expect(first.toString("utf8")).toContain("  expires:   in 1 min\n");
    // Under a minute left, the recap reads in seconds: the next one differs from the first.
    await untilPast(Date.parse(expiresAt) - 60_000);
    const at = ap.type(`show ${id}`);
    await ap.screen.waitFor(new RegExp(`expires:   in \\d+ s\\r\\n[\\s\\S]*approve ${id}   or   deny ${id}\\r\\n`), at);
    const last = ap.screen.lastRecapBytes(id);
    expect(last.equals(first)).toBe(false);
    const denied = ap.type(`deny ${id}`);
    await ap.screen.waitFor(new RegExp(`${id}: denied: PAY 19\\.00 EUR at shop\\.example`), denied);
    const record = await verified(await decisionRecord(agentUrl(), agentTls, id));
    expect(record).toMatchObject({ decision: "denied", ref: null, recap_sha256: sha256Hex(last) });
    expect(record.recap_sha256).not.toBe(sha256Hex(first));
  });

  test("narrowed below 76 columns nothing is decided; widened, the recap is written again and that is what is signed", async () => {
    const { id } = await payAsk();
    let at = ap.screen.text.length;
    ap.resize(60, 40);
    await ap.screen.waitFor(/widen it to decide\./, at);
    at = ap.type(`approve ${id}`);
    await ap.screen.waitFor(/widen it to decide\./, at);
    const pending = await fetch(`${agentUrl()}/v1/asks/${id}/decision`, { tls: agentTls } as RequestInit);
    expect({ status: pending.status, body: await pending.text() }).toEqual({ status: 409, body: '{"error":"DECISION_PENDING"}' });
    const before = ap.screen.bytes.length;
    at = ap.screen.text.length;
    ap.resize(100, 40);
    await ap.screen.waitFor(new RegExp(`approve ${id}   or   deny ${id}\\r\\n`), at);
    const rewritten = ap.screen.lastRecapBytes(id);
    expect(ap.screen.bytes.lastIndexOf(Buffer.from(`[ask ${id}]`))).toBeGreaterThan(before);
    at = ap.type(`approve ${id}`);
    await ap.screen.waitFor(new RegExp(`${id}: approved:`), at);
    expect(await verified(await decisionRecord(agentUrl(), agentTls, id))).toMatchObject({ decision: "approved", recap_sha256: sha256Hex(rewritten) });
  });
});

describe("the desk's spend ask on the person's terminal", () => {
  test("its own recap, which says the desk asked; approving it signs a record that binds the call", async () => {
    const args = { message: "hello, paid world" };
    const preview = canonicalJson(args);
    const body = {
      approval_id: mintApprovalId(),
      reservation_id: "res_9",
      tool: "everything__echo",
      price_mc: 150_000,
      key_id: "key_7h2k9d0q3x5m1n4p",
      key_name: "research-agent",
      org_id: "org_a1b2c3d4e5f6g7h8",
      org_name: "acme",
      params_sha256: sha256Hex(preview),
      preview,
      preview_cut: false,
    };
    const id = body.approval_id;
    let at = ap.screen.text.length;
    await postJson(`${deskUrl()}/v1/asks/spend`, deskTls, body);
    await ap.screen.waitFor(new RegExp(`approve ${id}   or   deny ${id}\\r\\n`), at);
    const shown = ap.screen.lastRecapBytes(id);
    expect(shown.toString("utf8")).toBe(
      [
        `[ask ${id}] SPEND 150,000 mc (150 cents)`,
        "  tool:      everything__echo",
        "  key:       research-agent",
        "  key id:    key_7h2k9d0q3x5m1n4p",
        "  org:       acme",
        "  org id:    org_a1b2c3d4e5f6g7h8",
        '  args:      (from the agent, unchecked) {"message":"hello, paid world"}',
        "  shown:     whole (it hashes to params_sha256)",
        "  asked by:  the desk (its own certificate and listener)",
        "  expires:   in 1 min",
        "  approving: SPEND 150,000 mc (150 cents) on everything__echo",
        `  approve ${id}   or   deny ${id}`,
        "",
      ].join("\n"),
    );
    at = ap.type(`approve ${id}`);
    await ap.screen.waitFor(new RegExp(`${id}: approved: SPEND 150,000 mc on everything__echo\\r\\n  the desk makes the call now; no step runs here`), at);
    const record = await verified(await decisionRecord(deskUrl(), deskTls, id));
    expect(record).toMatchObject({
      verb: "spend",
      decision: "approved",
      ref: null,
      recap_sha256: sha256Hex(shown),
      spend: {
        reservation_id: "res_9",
        tool: "everything__echo",
        price_mc: 150_000,
        key_id: body.key_id,
        org_id: body.org_id,
        params_sha256: body.params_sha256,
      },
    });
    const status = await fetch(`${deskUrl()}/v1/asks/${id}`, { tls: deskTls } as RequestInit);
    expect(await status.json()).toEqual({ approval_id: id, state: "approved" });
    // An agent never reads the desk's asks.
    expect((await fetch(`${agentUrl()}/v1/asks/${id}`, { tls: agentTls } as RequestInit)).status).toBe(404);
  });
});

describe("the records offline", () => {
  test("--export-decisions while the approver runs: every record, in chain order, verifies with --print-decision-keys", async () => {
    const exported = await runBinary(["approver", "--export-decisions", "--db", db]);
    expect(exported.code).toBe(0);
    expect(exported.stderr).toBe("");
    const lines = exported.stdout.trimEnd().split("\n");
    expect(lines.length).toBe(4);
    expect(lines.map((l) => JSON.parse(l).decision.seq)).toEqual([1, 2, 3, 4]);
    const keysFile = join(dir.path, "approver-keys.json");
    writeFileSync(keysFile, (await runBinary(["approver", "--print-decision-keys", "--db", db])).stdout);
    const exportFile = join(dir.path, "decisions.jsonl");
    writeFileSync(exportFile, exported.stdout);
    expect(await runBinary(["verify-receipt", "--jsonl", exportFile, "--keys", keysFile])).toEqual({
      code: 0,
      stdout: "4 decision records: 4 ok, 0 failed; chain intact\n",
      stderr: "",
    });
    const one = join(dir.path, "one.json");
    writeFileSync(one, lines[3]!);
    const r = await runBinary(["verify-receipt", one, "--keys", keysFile]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ok {3}signature \(kid [A-Za-z0-9_-]{43}\)\nok {3}readable copy \(seq 4: [0-9A-Z]{10} approved, spend ask\)\n$/);
  });

  test("the key set holds the current key only, public, its kid its thumbprint", async () => {
    const jwks = JSON.parse((await runBinary(["approver", "--print-decision-keys", "--db", db])).stdout);
    expect(jwks.keys.length).toBe(1);
    expect(Object.keys(jwks.keys[0]).sort()).toEqual(["alg", "crv", "kid", "kty", "use", "x"]);
    expect(() => ReceiptKeys.fromJwks(jwks)).not.toThrow();
  });
});
