// The approver's HTTP API behind real mutual TLS (Bun.serve with the command's own TLS settings
// and handler, the real ask ledger). Clock injected, so expiry needs no waiting.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { approverTls, makeApproverApi } from "../../src/commands/approver/http.ts";
import type { StoredAsk } from "../../src/core/asks.ts";
import { mintApprovalId } from "../../src/core/ids.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { type LinkPems, makeLinkPems } from "../helpers/certs.ts";
import { RECAP, TEST_SIGNER } from "../helpers/decision-signer.ts";

let link: LinkPems;
let foreign: LinkPems;
let ledger: AskLedger;
let server: ReturnType<typeof Bun.serve>;
let now = new Date("2026-11-30T10:00:00Z");
let handled = 0;
const announced: StoredAsk[] = [];
const faults: string[] = [];
const MAX_PENDING = 5;
const MAX_AMOUNT = "500";

beforeAll(async () => {
  [link, foreign] = await Promise.all([makeLinkPems(), makeLinkPems()]);
  ledger = AskLedger.open(":memory:", () => now, TEST_SIGNER);
  const api = makeApproverApi({
    // Only what the API may use: a route that tried to decide would fault (and the type refuses it).
    ledger: { create: ledger.create.bind(ledger), get: ledger.get.bind(ledger), decisionRecord: ledger.decisionRecord.bind(ledger) },
    side: "agent",
    sealExpired: () => ledger.sealExpired(),
    ttlMs: 600_000,
    maxPending: MAX_PENDING,
    maxAmount: MAX_AMOUNT,
    onCreated: (stored) => announced.push(stored),
    onFault: (what) => faults.push(what),
  });
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: approverTls({ cert: link.approverCert, key: link.approverKey, ca: link.clientCa }),
    fetch: (req) => {
      handled++;
      return api(req);
    },
  });
});
afterAll(() => {
  server.stop(true);
  ledger.close();
});

const clientTls = () => ({ cert: link.clientCert, key: link.clientKey, ca: link.approverCa });

function call(path: string, init: RequestInit & { tls?: object } = {}) {
  return fetch(`https://localhost:${server.port}${path}`, { tls: clientTls(), ...init });
}

function post(path: string, body: unknown, headers: Record<string, string> = { "content-type": "application/json" }) {
  return call(path, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
}

const payBody = (over: Record<string, unknown> = {}) => ({
  approval_id: mintApprovalId(),
  merchant: "Example Shop",
  amount: "19.00",
  currency: "EUR",
  card_handle: "card-2",
  checkout_url: "https://shop.example/checkout/123",
  ...over,
});

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type")).toStartWith("application/json");
  expect(await res.text()).toBe(JSON.stringify({ error: code }));
}

/** Decides every pending ask, so each test starts under the cap. */
function clearPending() {
  for (const s of ledger.listPending()) ledger.decide(s.ask.approval_id, "denied", { recapSha256: RECAP });
}

describe("approver API over mTLS", () => {
  test("a pay ask is stored and answered 201 pending with an RFC 3339 expiry", async () => {
    clearPending();
    const body = payBody({ reason: "renew the domain" });
    const res = await post("/v1/asks/pay", body);
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ approval_id: body.approval_id, state: "pending", expires_at: "2026-11-30T10:10:00.000Z" });
    expect(announced.at(-1)?.ask).toEqual({ kind: "pay", ...body });
  });

  test("an account ask is stored and answered the same way", async () => {
    clearPending();
    const id = mintApprovalId();
    const res = await post("/v1/asks/account", { approval_id: id, provider_url: "https://provider.example/signup", identity_handle: "work" });
    expect(res.status).toBe(201);
    expect(((await res.json()) as { state: string }).state).toBe("pending");
    expect(ledger.get(id)?.ask.kind).toBe("account");
  });

  test("status: pending, approved with its ref, denied, expired; unknown is 404", async () => {
    clearPending();
    const ids = [mintApprovalId(), mintApprovalId(), mintApprovalId()];
    for (const id of ids) expect((await post("/v1/asks/pay", payBody({ approval_id: id }))).status).toBe(201);
    const status = async (id: string) => (await call(`/v1/asks/${id}`)).json();
    expect(await status(ids[0]!)).toEqual({ approval_id: ids[0], state: "pending" });
    ledger.decide(ids[0]!, "approved", { ref: "demo-0a1b2c3d", recapSha256: RECAP });
    ledger.decide(ids[1]!, "denied", { recapSha256: RECAP });
    expect(await status(ids[0]!)).toEqual({ approval_id: ids[0], state: "approved", ref: "demo-0a1b2c3d" });
    expect(await status(ids[1]!)).toEqual({ approval_id: ids[1], state: "denied" });
    now = new Date(now.getTime() + 600_000);
    expect(await status(ids[2]!)).toEqual({ approval_id: ids[2], state: "expired" });
    await expectError(await call(`/v1/asks/${mintApprovalId()}`), 404, "ASK_NOT_FOUND");
    await expectError(await call("/v1/asks/k7q2m4xz3a"), 400, "APPROVAL_ID_INVALID");
  });

  test("the configured maximum amount holds at the approver, whatever the client checked", async () => {
    clearPending();
    const stored = announced.length;
    expect((await post("/v1/asks/pay", payBody({ amount: MAX_AMOUNT }))).status).toBe(201);
    await expectError(await post("/v1/asks/pay", payBody({ amount: "500.01" })), 400, "AMOUNT_TOO_LARGE");
    await expectError(await post("/v1/asks/pay", payBody({ amount: "900000" })), 400, "AMOUNT_TOO_LARGE");
    expect(announced.length).toBe(stored + 1);
  });

  test("an id seen before is refused with 409, also once decided or expired", async () => {
    clearPending();
    const body = payBody();
    expect((await post("/v1/asks/pay", body)).status).toBe(201);
    await expectError(await post("/v1/asks/pay", body), 409, "ID_ALREADY_USED");
    await expectError(await post("/v1/asks/account", { approval_id: body.approval_id, provider_url: "https://p.example/" }), 409, "ID_ALREADY_USED");
    ledger.decide(body.approval_id, "denied", { recapSha256: RECAP });
    await expectError(await post("/v1/asks/pay", body), 409, "ID_ALREADY_USED");
  });

  test("the pending cap answers 429 PENDING_LIMIT and stores nothing", async () => {
    clearPending();
    for (let i = 0; i < MAX_PENDING; i++) expect((await post("/v1/asks/pay", payBody())).status).toBe(201);
    const over = payBody();
    await expectError(await post("/v1/asks/pay", over), 429, "PENDING_LIMIT");
    expect(ledger.get(over.approval_id)).toBeUndefined();
    expect(ledger.countPending()).toBe(MAX_PENDING);
  });

  test("every field is checked again here; a card number anywhere is refused and not stored", async () => {
    clearPending();
    const card = "4111 1111 1111 1111";
    const cases: [Record<string, unknown>, string][] = [
      [{ merchant: `Shop ${card}` }, "CARD_NUMBER_REFUSED"],
      [{ reason: `use ${card}` }, "CARD_NUMBER_REFUSED"],
      [{ checkout_url: "https://shop.example/pay?c=4111111111111111" }, "CARD_NUMBER_REFUSED"],
      [{ card_handle: "card-4111111111111111" }, "CARD_NUMBER_REFUSED"],
      [{ extra: card }, "CARD_NUMBER_REFUSED"],
      [{ amount: "19.001" }, "AMOUNT_INVALID"],
      [{ currency: "XXY" }, "CURRENCY_INVALID"],
      [{ checkout_url: "http://shop.example/" }, "URL_INVALID"],
      [{ approval_id: "K7Q2M4XZ3I" }, "APPROVAL_ID_INVALID"],
      [{ extra: "x" }, "FIELD_UNKNOWN"],
    ];
    for (const [over, code] of cases) {
      const body = payBody(over);
      await expectError(await post("/v1/asks/pay", body), 400, code);
      expect(ledger.get(body.approval_id as string)).toBeUndefined();
    }
    const { merchant: _, ...missing } = payBody();
    await expectError(await post("/v1/asks/pay", missing), 400, "FIELD_MISSING");
  });

  test("bodies: not JSON, not an object, wrong content type", async () => {
    await expectError(await post("/v1/asks/pay", "{not json"), 400, "BODY_INVALID");
    await expectError(await post("/v1/asks/pay", "[1,2]"), 400, "BODY_INVALID");
    const notUtf8 = new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]);
    await expectError(await call("/v1/asks/pay", { method: "POST", headers: { "content-type": "application/json" }, body: notUtf8 }), 400, "BODY_INVALID");
    await expectError(await post("/v1/asks/pay", payBody(), { "content-type": "text/plain" }), 415, "CONTENT_TYPE_INVALID");
    await expectError(await post("/v1/asks/pay", payBody(), { "content-type": "application/json; charset=latin1" }), 415, "CONTENT_TYPE_INVALID");
    await expectError(await post("/v1/asks/pay", payBody(), {}), 415, "CONTENT_TYPE_INVALID");
  });

  test("a body over 16 KiB is refused, whether Content-Length says so or not", async () => {
    clearPending();
    const big = payBody({ reason: "x".repeat(17 * 1024) });
    await expectError(await post("/v1/asks/pay", big), 413, "BODY_TOO_LARGE");
    // Streamed (chunked, no Content-Length): the reader stops at the cap.
    const chunk = new TextEncoder().encode(" ".repeat(4096));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 64) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await call("/v1/asks/pay", { method: "POST", headers: { "content-type": "application/json" }, body: stream });
    await expectError(res, 413, "BODY_TOO_LARGE");
    expect(sent).toBeLessThan(64);
    // Exactly at the cap is still read (and then judged on its content).
    const atCap = JSON.stringify(payBody());
    expect((await post("/v1/asks/pay", atCap + " ".repeat(16 * 1024 - atCap.length))).status).toBe(201);
  });

  test("any other path or method is 404; nothing approves, denies, cancels or executes", async () => {
    clearPending();
    const body = payBody();
    expect((await post("/v1/asks/pay", body)).status).toBe(201);
    const id = body.approval_id;
    const attempts: [string, string][] = [
      ["POST", `/v1/asks/${id}/approve`],
      ["POST", `/v1/asks/${id}/deny`],
      ["POST", `/v1/asks/${id}/cancel`],
      ["POST", `/v1/asks/${id}`],
      ["PUT", `/v1/asks/${id}`],
      ["PATCH", `/v1/asks/${id}`],
      ["DELETE", `/v1/asks/${id}`],
      ["POST", "/v1/approve"],
      ["POST", "/v1/execute"],
      ["GET", "/v1/asks/pay"],
      ["GET", "/v1/asks"],
      ["GET", "/"],
      ["PUT", "/v1/asks/pay"],
      ["GET", `/v1/asks/${id}/`],
    ];
    for (const [method, path] of attempts) {
      const res = await call(path, {
        method,
        headers: { "content-type": "application/json" },
        body: method === "GET" ? undefined : JSON.stringify({ ref: "demo-00000000" }),
      });
      await expectError(res, 404, "NOT_FOUND");
    }
    // Every method on the ask's own path, with a query that asks to decide: never a decision.
    for (const method of ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]) {
      for (const query of ["?approve=1", "?decision=approved&ref=demo-00000000", "?state=denied"]) {
        const res = await call(`/v1/asks/${id}${query}`, { method });
        expect(res.status).toBe(method === "GET" ? 200 : 404);
        await res.arrayBuffer();
      }
    }
    expect(ledger.get(id)?.state).toBe("pending");
    expect(faults).toEqual([]);
  });

  test("clients without a certificate from the client CA never reach the handler", async () => {
    const before = handled;
    const tries = [
      { ca: link.approverCa },
      { cert: foreign.clientCert, key: foreign.clientKey, ca: link.approverCa },
      { cert: link.approverCert, key: link.approverKey, ca: link.approverCa },
    ];
    for (const tls of tries) {
      await expect(
        call("/v1/asks/pay", { tls, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payBody()), keepalive: false }),
      ).rejects.toThrow();
    }
    expect(handled).toBe(before);
  });
});
