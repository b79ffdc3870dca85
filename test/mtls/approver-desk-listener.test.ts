// The approver's two listeners behind real mutual TLS: the agents' (client CA) and the desk's
// (desk CA, from `certs --desk`), each with the command's own TLS settings and handler over one
// real ask ledger. Which listener's CA accepted the handshake is what tells the desk's asks from
// an agent's: the agent's client.pem can never make a spend ask, nor the desk's certificate a pay
// ask, and a certificate of neither CA reaches no handler.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { approverTls, makeApproverApi } from "../../src/commands/approver/http.ts";
import type { AskSide, StoredAsk } from "../../src/core/asks.ts";
import { openDecision } from "../../src/core/decision/verify.ts";
import { mintApprovalId } from "../../src/core/ids.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { canonicalJson } from "../../src/core/receipt/canonical.ts";
import { hashJson, sha256Hex } from "../../src/core/receipt/hash.ts";
import { jwksOf } from "../../src/core/receipt/sign.ts";
import { ReceiptKeys } from "../../src/core/receipt/verify.ts";
import { type DeskPems, type LinkPems, makeDeskPems, makeLinkPems } from "../helpers/certs.ts";
import { RECAP, TEST_KEY, TEST_SIGNER } from "../helpers/decision-signer.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";

let link: LinkPems;
let deskPems: DeskPems;
let foreign: LinkPems;
let foreignDesk: DeskPems;
let ledger: AskLedger;
let now = new Date("2026-11-30T10:00:00Z");
const servers: Record<AskSide, ReturnType<typeof Bun.serve>> = {} as never;
const handled: Record<AskSide, number> = { agent: 0, desk: 0 };
const announced: StoredAsk[] = [];

beforeAll(async () => {
  [link, deskPems, foreign, foreignDesk] = await Promise.all([makeLinkPems(), makeDeskPems(), makeLinkPems(), makeDeskPems()]);
  ledger = AskLedger.open(":memory:", () => now, TEST_SIGNER);
  for (const side of ["agent", "desk"] as const) {
    const api = makeApproverApi({
      side,
      ledger: { create: ledger.create.bind(ledger), get: ledger.get.bind(ledger), decisionRecord: ledger.decisionRecord.bind(ledger) },
      sealExpired: () => ledger.sealExpired(),
      ttlMs: 600_000,
      maxPending: 50,
      maxAmount: "1000000",
      onCreated: (stored) => announced.push(stored),
      onFault: () => {},
    });
    servers[side] = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: approverTls({ cert: link.approverCert, key: link.approverKey, ca: side === "agent" ? link.clientCa : deskPems.deskCa }),
      fetch: (req) => {
        handled[side]++;
        return api(req);
      },
    });
  }
});
afterAll(() => {
  for (const s of Object.values(servers)) s.stop(true);
  ledger.close();
});

type Client = { cert: string; key: string; ca: string };
const AGENT = (): Client => ({ cert: link.clientCert, key: link.clientKey, ca: link.approverCa });
const DESK = (): Client => ({ cert: deskPems.deskCert, key: deskPems.deskKey, ca: link.approverCa });

function call(side: AskSide, client: Client, path: string, init: RequestInit = {}) {
  return fetch(`https://localhost:${servers[side].port}${path}`, { tls: client, ...init } as RequestInit);
}
const post = (side: AskSide, client: Client, path: string, body: unknown) =>
  call(side, client, path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

const ARGS = { message: "hello, paid world" };
const spendBody = (over: Record<string, unknown> = {}) => {
  const preview = canonicalJson(ARGS);
  return {
    approval_id: mintApprovalId(),
    reservation_id: "res_7",
    tool: "everything__echo",
    price_mc: 150_000,
    key_id: "key_1",
    key_name: "research-agent",
    org_id: "org_1",
    org_name: "acme",
    params_sha256: sha256Hex(preview),
    preview,
    preview_cut: false,
    ...over,
  };
};
const payBody = () => ({ approval_id: mintApprovalId(), ...PAY_FIELDS });

async function expectError(res: Response, status: number, code: string) {
  expect({ status: res.status, body: await res.text() }).toEqual({ status, body: JSON.stringify({ error: code }) });
}

/** The request never reached a handler: the handshake refused the certificate. */
async function expectRefusedHandshake(side: AskSide, client: Client, path: string, body: unknown) {
  const before = handled[side];
  const stored = announced.length;
  await expect(post(side, client, path, body)).rejects.toThrow();
  expect(handled[side]).toBe(before);
  expect(announced.length).toBe(stored);
}

describe("who may ask what", () => {
  test("the desk's certificate on the desk's listener: a spend ask is stored, exactly as sent", async () => {
    const body = spendBody();
    const res = await post("desk", DESK(), "/v1/asks/spend", body);
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ approval_id: body.approval_id, state: "pending", expires_at: "2026-11-30T10:10:00.000Z" });
    expect(ledger.get(body.approval_id)?.ask).toEqual({ kind: "spend", ...body });
  });

  test("the agent's client.pem on the agents' listener: no spend route (404), nothing stored", async () => {
    const body = spendBody();
    const before = announced.length;
    await expectError(await post("agent", AGENT(), "/v1/asks/spend", body), 404, "NOT_FOUND");
    expect(announced.length).toBe(before);
    expect(ledger.get(body.approval_id)).toBeUndefined();
  });

  test("the agent's client.pem on the desk's listener: refused in the handshake", async () => {
    await expectRefusedHandshake("desk", AGENT(), "/v1/asks/spend", spendBody());
  });

  test("the desk's certificate on the agents' listener: refused in the handshake, so it cannot make pay asks", async () => {
    await expectRefusedHandshake("agent", DESK(), "/v1/asks/pay", payBody());
  });

  test("on the desk's listener the agents' routes are not there", async () => {
    await expectError(await post("desk", DESK(), "/v1/asks/pay", payBody()), 404, "NOT_FOUND");
    await expectError(await post("desk", DESK(), "/v1/asks/account", { approval_id: mintApprovalId(), provider_url: "https://p.example/" }), 404, "NOT_FOUND");
  });

  test("certificates of neither CA, another link's client and another desk: refused on both listeners", async () => {
    const strangers: Client[] = [
      { cert: foreign.clientCert, key: foreign.clientKey, ca: link.approverCa },
      { cert: foreignDesk.deskCert, key: foreignDesk.deskKey, ca: link.approverCa },
      // The approver's own certificate as a client.
      { cert: link.approverCert, key: link.approverKey, ca: link.approverCa },
    ];
    for (const client of strangers) {
      await expectRefusedHandshake("agent", client, "/v1/asks/pay", payBody());
      await expectRefusedHandshake("desk", client, "/v1/asks/spend", spendBody());
    }
  });

  test("each listener reads only its own side's asks", async () => {
    const spend = spendBody();
    await post("desk", DESK(), "/v1/asks/spend", spend);
    const pay = payBody();
    expect((await post("agent", AGENT(), "/v1/asks/pay", pay)).status).toBe(201);
    await expectError(await call("agent", AGENT(), `/v1/asks/${spend.approval_id}`), 404, "ASK_NOT_FOUND");
    await expectError(await call("agent", AGENT(), `/v1/asks/${spend.approval_id}/decision`), 404, "ASK_NOT_FOUND");
    await expectError(await call("desk", DESK(), `/v1/asks/${pay.approval_id}`), 404, "ASK_NOT_FOUND");
    expect(await (await call("desk", DESK(), `/v1/asks/${spend.approval_id}`)).json()).toEqual({ approval_id: spend.approval_id, state: "pending" });
  });
});

describe("the spend ask's rules over the wire", () => {
  test("each refusal is its code with status 400, and stores nothing", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ price_mc: "150000" }, "PRICE_INVALID"],
      [{ tool: "echo" }, "TOOL_INVALID"],
      [{ preview: '{"message":"other"}' }, "PREVIEW_INVALID"],
      [{ key_name: "4111 1111 1111 1111" }, "CARD_NUMBER_REFUSED"],
      [{ reason: "hurry" }, "FIELD_UNKNOWN"],
    ];
    for (const [over, code] of cases) {
      const body = spendBody(over);
      await expectError(await post("desk", DESK(), "/v1/asks/spend", body), 400, code);
      expect(ledger.get(body.approval_id)).toBeUndefined();
    }
  });

  test("an id the desk used before is refused with 409, whatever the ask says", async () => {
    const body = spendBody();
    expect((await post("desk", DESK(), "/v1/asks/spend", body)).status).toBe(201);
    await expectError(await post("desk", DESK(), "/v1/asks/spend", { ...body, price_mc: 1 }), 409, "ID_ALREADY_USED");
    expect(ledger.get(body.approval_id)?.ask).toMatchObject({ price_mc: 150_000 });
  });
});

describe("GET /v1/asks/{id}/decision", () => {
  const keys = () => ReceiptKeys.fromJwks(jwksOf(TEST_KEY.publicJwk()));

  test("409 DECISION_PENDING until the person decides; then the signed record, which verifies and names the stored ask", async () => {
    const body = spendBody();
    await post("desk", DESK(), "/v1/asks/spend", body);
    await expectError(await call("desk", DESK(), `/v1/asks/${body.approval_id}/decision`), 409, "DECISION_PENDING");
    ledger.decide(body.approval_id, "approved", { recapSha256: RECAP });
    const res = await call("desk", DESK(), `/v1/asks/${body.approval_id}/decision`);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const envelope = await res.json();
    const opened = openDecision(envelope, keys());
    expect(opened.checks.every((c) => c.ok)).toBe(true);
    expect(opened.signed).toMatchObject({
      approval_id: body.approval_id,
      verb: "spend",
      decision: "approved",
      ref: null,
      recap_sha256: RECAP,
      // The desk can hash what it sent and find the same ask here.
      ask_sha256: hashJson({ verb: "spend", ...body }),
      spend: { reservation_id: "res_7", tool: "everything__echo", price_mc: 150_000, key_id: "key_1", org_id: "org_1", params_sha256: body.params_sha256 },
    });
    expect(await (await call("desk", DESK(), `/v1/asks/${body.approval_id}`)).json()).toEqual({ approval_id: body.approval_id, state: "approved" });
  });

  test("an ask that expired undecided has its expiry record as soon as it is read", async () => {
    const body = spendBody();
    await post("desk", DESK(), "/v1/asks/spend", body);
    const saved = now;
    now = new Date(now.getTime() + 600_000);
    try {
      const envelope = await (await call("desk", DESK(), `/v1/asks/${body.approval_id}/decision`)).json();
      expect(openDecision(envelope, keys()).signed).toMatchObject({ decision: "expired", recap_sha256: null, decided_at: "2026-11-30T10:10:00.000Z" });
    } finally {
      now = saved;
    }
  });

  test("the agents' listener serves the records of pay asks the same way; a bad id is 400, an unknown one 404", async () => {
    const pay = payBody();
    await post("agent", AGENT(), "/v1/asks/pay", pay);
    ledger.decide(pay.approval_id, "denied", { recapSha256: RECAP });
    const envelope = await (await call("agent", AGENT(), `/v1/asks/${pay.approval_id}/decision`)).json();
    expect(openDecision(envelope, keys()).signed).toMatchObject({ verb: "pay", decision: "denied" });
    await expectError(await call("agent", AGENT(), "/v1/asks/k7q2m4xz3a/decision"), 400, "APPROVAL_ID_INVALID");
    await expectError(await call("agent", AGENT(), "/v1/asks/ZZZZZZZZZZ/decision"), 404, "ASK_NOT_FOUND");
    await expectError(await call("agent", AGENT(), `/v1/asks/${pay.approval_id}/decision`, { method: "POST" }), 404, "NOT_FOUND");
  });
});
