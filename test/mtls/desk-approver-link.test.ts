// The desk's end of its link to the approver (adapters/approver-link) against an HTTPS server
// that poses as the approver with every wrong answer: the desk gets one of its port's few
// answers each time, never a field it did not ask for, and a decision only as the envelope it
// then verifies. And the pinned decision keys: read again on a rotation, kept when the file breaks.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ApproverLink } from "../../src/adapters/approver-link/client.ts";
import { FileDecisionKeys, readDecisionKeys } from "../../src/adapters/approver-link/decision-keys.ts";
import { mintApprovalId } from "../../src/core/ids.ts";
import { jwksOf } from "../../src/core/receipt/index.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";
import { makeDeskPems, makeLinkPems } from "../helpers/certs.ts";
import { testSigningKey } from "../helpers/decision-signer.ts";
import { tempDir } from "../helpers/tmp.ts";

type Answer = { status: number; body: string; type?: string; headers?: Record<string, string> };
let answer: Answer = { status: 500, body: "{}" };
let seen: { method: string; path: string; body: string }[] = [];
let server: ReturnType<typeof Bun.serve>;
let link: ApproverLink;
const tmp = tempDir("desk-approver-link-");

beforeAll(async () => {
  const pems = await makeLinkPems();
  const desk = await makeDeskPems();
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pems.approverCert, key: pems.approverKey, ca: desk.deskCa, requestCert: true, rejectUnauthorized: true },
    async fetch(req) {
      seen.push({ method: req.method, path: new URL(req.url).pathname, body: await req.text() });
      return new Response(answer.body, { status: answer.status, headers: { "content-type": answer.type ?? "application/json", ...answer.headers } });
    },
  });
  link = new ApproverLink({
    baseUrl: new URL(`https://localhost:${server.port}/`),
    tls: { cert: desk.deskCert, key: desk.deskKey, ca: pems.approverCa },
    timeoutMs: 2000,
  });
});

afterAll(async () => {
  await server.stop(true);
  tmp[Symbol.dispose]();
});

const preview = JSON.stringify({ text: "x" });
const ask = () => ({
  approval_id: mintApprovalId(),
  reservation_id: "res_1",
  tool: "fx__echo",
  price_mc: 5000,
  key_id: "key_a",
  key_name: "",
  org_id: "org_a",
  org_name: "acme",
  params_sha256: sha256Hex(preview),
  preview,
  preview_cut: false,
});

describe("the spend ask", () => {
  test("201 with the ask's own id: pending until the approver's expiry; the body sent is the ask, to /v1/asks/spend", async () => {
    const a = ask();
    answer = { status: 201, body: JSON.stringify({ approval_id: a.approval_id, state: "pending", expires_at: "2026-12-01T10:10:00.000Z" }) };
    seen = [];
    expect(await link.ask(a)).toEqual({ kind: "pending", expiresAt: Date.parse("2026-12-01T10:10:00.000Z") });
    expect(seen).toEqual([{ method: "POST", path: "/v1/asks/spend", body: JSON.stringify(a) }]);
  });

  test("every other answer is unavailable, or a refusal of a field the approver names with its own status", async () => {
    const a = ask();
    const created = (o: Record<string, unknown>) =>
      JSON.stringify({ approval_id: a.approval_id, state: "pending", expires_at: "2026-12-01T10:10:00.000Z", ...o });
    const cases: [Answer, string][] = [
      [{ status: 201, body: created({ approval_id: "K7Q2M4XZ3A" }) }, "unavailable"],
      [{ status: 201, body: created({ recap: "injected" }) }, "unavailable"],
      [{ status: 201, body: created({ expires_at: "tomorrow" }) }, "unavailable"],
      [{ status: 201, body: created({}), type: "text/html" }, "unavailable"],
      [{ status: 201, body: "not json" }, "unavailable"],
      [{ status: 201, body: JSON.stringify({ pad: "x".repeat(20_000) }) }, "unavailable"],
      [{ status: 302, body: "{}", headers: { location: "https://elsewhere.example/" } }, "unavailable"],
      [{ status: 429, body: JSON.stringify({ error: "PENDING_LIMIT" }) }, "unavailable"],
      [{ status: 500, body: JSON.stringify({ error: "INTERNAL" }) }, "unavailable"],
      [{ status: 400, body: JSON.stringify({ error: "PRICE_INVALID", why: "x" }) }, "unavailable"],
      [{ status: 409, body: JSON.stringify({ error: "PRICE_INVALID" }) }, "unavailable"],
      [{ status: 400, body: JSON.stringify({ error: "PRICE_INVALID" }) }, "refused PRICE_INVALID"],
      [{ status: 400, body: JSON.stringify({ error: "CARD_NUMBER_REFUSED" }) }, "refused CARD_NUMBER_REFUSED"],
    ];
    for (const [given, wanted] of cases) {
      answer = given;
      const got = await link.ask(a);
      expect({ given, got: got.kind === "refused" ? `refused ${got.code}` : got.kind }).toEqual({ given, got: wanted });
    }
  });

  test("no approver listening, or one that does not answer in time: unavailable, with a reason for the log", async () => {
    const closed = new ApproverLink({ baseUrl: new URL("https://localhost:1/"), tls: { cert: "", key: "", ca: "" }, timeoutMs: 500 });
    expect((await closed.ask(ask())).kind).toBe("unavailable");
  });
});

describe("the decision", () => {
  test("200 is the envelope as sent (verified by the desk, not here); 409 DECISION_PENDING is pending; anything else is a bad answer or unavailable", async () => {
    const id = mintApprovalId();
    const envelope = { payload: "e30", signature: "s", kid: "k", decision: {} };
    answer = { status: 200, body: JSON.stringify(envelope) };
    seen = [];
    expect(await link.decision(id)).toEqual({ kind: "decided", envelope });
    expect(seen.map((s) => `${s.method} ${s.path}`)).toEqual([`GET /v1/asks/${id}/decision`]);
    answer = { status: 409, body: JSON.stringify({ error: "DECISION_PENDING" }) };
    expect(await link.decision(id)).toEqual({ kind: "pending" });
    for (const given of [
      { status: 404, body: JSON.stringify({ error: "ASK_NOT_FOUND" }) },
      { status: 400, body: JSON.stringify({ error: "DECISION_PENDING" }) },
      { status: 202, body: "{}" },
    ]) {
      answer = given;
      expect((await link.decision(id)).kind).toBe("bad_answer");
    }
    answer = { status: 200, body: "<html>", type: "text/html" };
    expect((await link.decision(id)).kind).toBe("unavailable");
  });
});

describe("the pinned decision keys", () => {
  test("read again when asked (a rotation), the old ones kept when the file no longer reads", () => {
    const path = join(tmp.path, "approver-keys.json");
    const first = testSigningKey();
    const second = testSigningKey();
    writeFileSync(path, JSON.stringify(jwksOf(first.publicJwk())));
    const keys = new FileDecisionKeys(path, readDecisionKeys(path));
    expect(keys.current().kids).toEqual([first.kid]);
    writeFileSync(path, JSON.stringify(jwksOf(second.publicJwk(), [first.publicJwk()])));
    expect(keys.reload()!.kids).toEqual([second.kid, first.kid]);
    writeFileSync(path, "{ broken");
    expect(keys.reload()).toBeNull();
    expect(keys.current().kids).toEqual([second.kid, first.kid]);
  });
});
