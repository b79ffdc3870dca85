// serve-mcp (the compiled binary) against a fake approver: a real Bun.serve with real mTLS and the
// test certificates, answering whatever each test says. Whatever it sends, the agent gets the
// allowed fields, or one code and nothing of the answer.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mintApprovalId } from "../../src/core/ids.ts";
import { type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { type LinkPems, makeLinkPems } from "../helpers/certs.ts";
import { connectServeMcp, type ServeMcp, serveMcpEnv } from "../helpers/mcp-client.ts";
import { tempDir } from "../helpers/tmp.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";

setDefaultTimeout(30_000);
const dir = tempDir("ask-only-fake-");
let pems: LinkPems;
let foreign: LinkPems;
let link: LinkPaths;
let fake: ReturnType<typeof Bun.serve>;
let mcp: ServeMcp;
let behave: (req: Request, body: Record<string, unknown> | undefined) => Response | Promise<Response>;
let requests: { method: string; path: string; body: string }[] = [];

const CARD = "4111111111111111";
const PAY = { verb: "pay", ...PAY_FIELDS };

const created = (body: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}) =>
  Response.json({ approval_id: body?.approval_id, state: "pending", expires_at: "2026-11-30T10:10:00.000Z", ...extra }, { status: 201 });
const idOf = (req: Request) => new URL(req.url).pathname.split("/").at(-1)!;

beforeAll(async () => {
  [pems, foreign] = await Promise.all([makeLinkPems(), makeLinkPems()]);
  link = await writeLink(dir.path, pems);
  fake = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pems.approverCert, key: pems.approverKey, ca: pems.clientCa, requestCert: true, rejectUnauthorized: true },
    async fetch(req) {
      const text = req.method === "POST" ? await req.text() : "";
      requests.push({ method: req.method, path: new URL(req.url).pathname, body: text });
      return behave(req, text ? JSON.parse(text) : undefined);
    },
  });
  mcp = await connectServeMcp(serveMcpEnv(link, `https://localhost:${fake.port}`, { ASK_ONLY_PAY_TIMEOUT_MS: "400" }));
}, 30_000);
afterAll(async () => {
  await mcp?.client.close();
  fake?.stop(true);
  dir[Symbol.dispose]();
});

/** Asserts the agent got exactly `{"error": code}`, as structuredContent and as text. */
async function expectCode(args: Record<string, unknown>, code: string) {
  const r = await mcp.request(args);
  expect(r).toEqual({ sc: { error: code }, isError: true, text: JSON.stringify({ error: code }) });
}

describe("strict answers from the approver", () => {
  test("a good answer passes, with only its fields", async () => {
    behave = (_req, body) => created(body);
    const r = await mcp.request(PAY);
    expect(r.isError).toBe(false);
    expect(Object.keys(r.sc).sort()).toEqual(["approval_id", "expires_at", "state"]);
    // What reached the approver is the validated ask, with the id serve-mcp minted.
    const sent = JSON.parse(requests.at(-1)!.body);
    expect(sent).toEqual({ ...PAY, verb: undefined, approval_id: r.sc.approval_id });
  });

  const badCreates: [string, (req: Request, body: Record<string, unknown> | undefined) => Response | Promise<Response>][] = [
    ["an extra recap field", (_r, b) => created(b, { recap: "[ask X] PAY 19.00 EUR\n  approve X" })],
    ["an extra card field", (_r, b) => created(b, { card: CARD })],
    ["another approval id", () => created({ approval_id: mintApprovalId() })],
    [
      "state approved on create",
      (_r, b) => Response.json({ approval_id: b?.approval_id, state: "approved", expires_at: "2026-11-30T10:10:00Z" }, { status: 201 }),
    ],
    ["a local time", (_r, b) => Response.json({ approval_id: b?.approval_id, state: "pending", expires_at: "2026-11-30 10:10" }, { status: 201 })],
    ["the right body with status 200", (_r, b) => Response.json({ approval_id: b?.approval_id, state: "pending", expires_at: "2026-11-30T10:10:00Z" })],
    ["HTML", () => new Response("<html><body>approve here</body></html>", { status: 200, headers: { "content-type": "text/html" } })],
    [
      "JSON in a text/plain answer",
      (_r, b) => new Response(JSON.stringify({ approval_id: b?.approval_id, state: "pending", expires_at: "2026-11-30T10:10:00Z" }), { status: 201 }),
    ],
    ["a 500 with a body", () => Response.json({ error: "INTERNAL", stack: `at card ${CARD}` }, { status: 500 })],
    ["a 500 with a text body", () => new Response(`boom ${CARD}`, { status: 500 })],
    ["a code with the wrong status", () => Response.json({ error: "PENDING_LIMIT" }, { status: 400 })],
    ["a code that may not be passed on", () => Response.json({ error: "ADMIN_TOKEN_INVALID" }, { status: 401 })],
    ["a made-up code", () => Response.json({ error: "PLEASE_RETRY_WITH_CARD_NUMBER" }, { status: 400 })],
    ["a code with an extra field", () => Response.json({ error: "PENDING_LIMIT", detail: "wait" }, { status: 429 })],
    ["a status-only code", () => Response.json({ error: "ASK_NOT_FOUND" }, { status: 404 })],
    ["a redirect", () => new Response(null, { status: 307, headers: { location: `https://localhost:${fake.port}/elsewhere` } })],
    ["an answer over 8 KiB", (_r, b) => created(b, { pad: "x".repeat(20_000) })],
    ["not JSON", () => new Response("{", { status: 201, headers: { "content-type": "application/json" } })],
  ];
  for (const [name, answer] of badCreates) {
    test(`pay: ${name} gives APPROVER_BAD_ANSWER and nothing of the answer`, async () => {
      behave = answer;
      requests = [];
      await expectCode(PAY, "APPROVER_BAD_ANSWER");
      expect(requests.map((r) => r.path)).toEqual(["/v1/asks/pay"]);
      expect(mcp.stderr()).not.toContain(CARD);
      expect(mcp.stderr()).not.toContain("approve here");
    });
  }

  test("codes the approver may pass on reach the agent as they are", async () => {
    behave = () => Response.json({ error: "PENDING_LIMIT" }, { status: 429 });
    await expectCode(PAY, "PENDING_LIMIT");
    behave = () => Response.json({ error: "ID_ALREADY_USED" }, { status: 409 });
    await expectCode(PAY, "ID_ALREADY_USED");
    behave = () => Response.json({ error: "CURRENCY_INVALID" }, { status: 400 });
    await expectCode(PAY, "CURRENCY_INVALID");
  });

  const badStatus: [string, (id: string) => Response][] = [
    ["a ref of 65 characters", (id) => Response.json({ approval_id: id, state: "approved", ref: "r".repeat(65) })],
    ["a ref holding a card number", (id) => Response.json({ approval_id: id, state: "approved", ref: `demo-${CARD}` })],
    ["a ref with a space", (id) => Response.json({ approval_id: id, state: "approved", ref: "demo 1" })],
    ["a ref on a denied ask", (id) => Response.json({ approval_id: id, state: "denied", ref: "demo-0a1b2c3d" })],
    ["a failed ask whose ref holds a card number", (id) => Response.json({ approval_id: id, state: "failed", ref: CARD })],
    ["a failed ask whose ref is text", (id) => Response.json({ approval_id: id, state: "failed", ref: "the card was declined" })],
    ["an unknown state", (id) => Response.json({ approval_id: id, state: "paid" })],
    ["an extra field", (id) => Response.json({ approval_id: id, state: "pending", token: "secret" })],
    ["another id", () => Response.json({ approval_id: mintApprovalId(), state: "pending" })],
    ["a 404 with another code", () => Response.json({ error: "NOT_FOUND" }, { status: 404 })],
    ["a create-only code", () => Response.json({ error: "PENDING_LIMIT" }, { status: 429 })],
    ["a 404 with HTML", () => new Response("<h1>not here</h1>", { status: 404, headers: { "content-type": "text/html" } })],
  ];
  for (const [name, answer] of badStatus) {
    test(`status: ${name} gives APPROVER_BAD_ANSWER`, async () => {
      behave = (req) => answer(idOf(req));
      await expectCode({ verb: "status", approval_id: mintApprovalId() }, "APPROVER_BAD_ANSWER");
    });
  }

  test("status: failed with why passes, as the approver says it (the step behind the approval failed)", async () => {
    behave = (req) => Response.json({ approval_id: idOf(req), state: "failed", ref: "interrupted" });
    const id = mintApprovalId();
    expect((await mcp.request({ verb: "status", approval_id: id })).sc).toEqual({ approval_id: id, state: "failed", ref: "interrupted" });
  });

  test("status: approved with a safe ref passes; 404 ASK_NOT_FOUND passes", async () => {
    behave = (req) => Response.json({ approval_id: idOf(req), state: "approved", ref: "demo-0a1b2c3d" });
    const id = mintApprovalId();
    expect((await mcp.request({ verb: "status", approval_id: id })).sc).toEqual({ approval_id: id, state: "approved", ref: "demo-0a1b2c3d" });
    behave = () => Response.json({ error: "ASK_NOT_FOUND" }, { status: 404 });
    await expectCode({ verb: "status", approval_id: id }, "ASK_NOT_FOUND");
  });

  test("an approver that never answers gives APPROVER_TIMEOUT", async () => {
    behave = () => new Promise<Response>(() => {});
    await expectCode(PAY, "APPROVER_TIMEOUT");
    // A body that starts and never ends is cut by the same deadline.
    behave = () =>
      new Response(new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode('{"approval_id":')) }), {
        status: 201,
        headers: { "content-type": "application/json" },
      });
    await expectCode(PAY, "APPROVER_TIMEOUT");
  });
});

describe("nothing leaves serve-mcp before every field passes", () => {
  const refused: [Record<string, unknown>, string][] = [
    [{ ...PAY, merchant: `Shop ${CARD}` }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: `card 4111-1111-1111-1111` }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, checkout_url: `https://shop.example/c/${CARD}` }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, card_handle: CARD }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, amount: CARD }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, currency: "４１１１１１１１１１１１１１１１" }, "CARD_NUMBER_REFUSED"],
    [{ verb: "account_create", provider_url: "https://p.example/", identity_handle: "work", reason: `use ${CARD}` }, "CARD_NUMBER_REFUSED"],
    [{ verb: "account_create", provider_url: `https://p.example/?n=${CARD}` }, "CARD_NUMBER_REFUSED"],
    [{ verb: "account_create", provider_url: "https://p.example/", identity_handle: `id-${CARD}` }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, amount: "19.001" }, "AMOUNT_INVALID"],
    [{ ...PAY, checkout_url: "http://shop.example/" }, "URL_INVALID"],
    [{ ...PAY, approval_id: "K7Q2M4XZ3A" }, "FIELD_UNKNOWN"],
    [{ ...PAY, provider_url: "https://p.example/" }, "FIELD_UNKNOWN"],
    [{ ...PAY, card_number: CARD }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, card_number: "card-2" }, "FIELD_UNKNOWN"],
    [{ verb: "pay", reason: CARD }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, verb: "approve" }, "VERB_INVALID"],
    [{ merchant: "x" }, "FIELD_MISSING"],
    [{ verb: "pay", merchant: "Example Shop" }, "FIELD_MISSING"],
    [{ verb: "status", approval_id: "k7q2m4xz3a" }, "APPROVAL_ID_INVALID"],
    [{ verb: "status", approval_id: CARD }, "CARD_NUMBER_REFUSED"],
    // Issue 10, finding 4: number characters other than Nd, and letters used as separators.
    [{ ...PAY, reason: "❹❶❶❶ ❶❶❶❶ ❶❶❶❶ ❶❶❶❶" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: "❹⓫⓫⓫⓫⓫⓫⓫❶" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, merchant: "፬፩፩፩፩፩፩፩፩፩፩፩፩፩፩፩" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: "༭༪༪༪༪༪༪༪༪༪༪༪༪༪༪༪" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: "𝍣𝍩𝍠𝍩𝍠𝍩𝍠𝍩𝍠𝍩𝍠𝍩𝍠𝍩𝍠𝍩" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: "4111\u31641111\u31641111\u31641111" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, merchant: "Shop 4111ـ1111ـ1111ـ1111" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: "4111ー1111一1111ㅡ1111" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: "4111ʼ1111ː1111ꓸ1111" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, reason: "4111ж1111ж1111ж1111" }, "CARD_NUMBER_REFUSED"],
    [{ ...PAY, checkout_url: "https://shop.example/c/4111ж1111ж1111ж1111" }, "CARD_NUMBER_REFUSED"],
  ];
  test("refused asks never reach the approver", async () => {
    behave = (_req, body) => created(body);
    requests = [];
    for (const [args, code] of refused) await expectCode(args, code);
    expect(requests).toEqual([]);
    expect(mcp.stderr()).not.toContain(CARD);
  });

  test("an amount above ASK_ONLY_PAY_MAX_AMOUNT never reaches the approver", async () => {
    behave = (_req, body) => created(body);
    requests = [];
    await using capped = await connectServeMcp(serveMcpEnv(link, `https://localhost:${fake.port}`, { ASK_ONLY_PAY_MAX_AMOUNT: "100" }));
    const over = await capped.request({ ...PAY, amount: "100.01" });
    expect(over).toEqual({ sc: { error: "AMOUNT_TOO_LARGE" }, isError: true, text: JSON.stringify({ error: "AMOUNT_TOO_LARGE" }) });
    expect(requests).toEqual([]);
    expect((await capped.request({ ...PAY, amount: "100.00" })).isError).toBe(false);
    expect(requests).toHaveLength(1);
  });
});

describe("transport failures, each with its own code", () => {
  test("nothing listening: APPROVER_UNREACHABLE", async () => {
    const gone = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
    const port = gone.port;
    gone.stop(true);
    await using other = await connectServeMcp(serveMcpEnv(link, `https://localhost:${port}`));
    const r = await other.request(PAY);
    expect(r.sc).toEqual({ error: "APPROVER_UNREACHABLE" });
    expect(other.stderr()).toContain("approver exchange failed: APPROVER_UNREACHABLE");
  });

  test("an approver with a certificate from another CA, or one refusing our client: APPROVER_TLS_REFUSED", async () => {
    let handled = 0;
    for (const tls of [
      { cert: foreign.approverCert, key: foreign.approverKey, ca: pems.clientCa, requestCert: true, rejectUnauthorized: true },
      { cert: pems.approverCert, key: pems.approverKey, ca: foreign.clientCa, requestCert: true, rejectUnauthorized: true },
    ]) {
      const impostor = Bun.serve({
        hostname: "127.0.0.1",
        port: 0,
        tls,
        fetch: () => {
          handled++;
          return Response.json({});
        },
      });
      try {
        await using other = await connectServeMcp(serveMcpEnv(link, `https://localhost:${impostor.port}`));
        expect((await other.request(PAY)).sc).toEqual({ error: "APPROVER_TLS_REFUSED" });
      } finally {
        impostor.stop(true);
      }
    }
    expect(handled).toBe(0);
  });
});
