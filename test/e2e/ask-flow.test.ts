// The whole ask side with the compiled binary: an MCP client drives `dist/ask-only serve-mcp`,
// the approver runs as its own process, and the test types on its console as a person would.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { approverFiles, type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { type ApproverProcess, startApprover } from "../helpers/approver-process.ts";
import { connectServeMcp, serveMcpEnv } from "../helpers/mcp-client.ts";
import { tempDir } from "../helpers/tmp.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";

setDefaultTimeout(30_000);
const dir = tempDir("ask-only-flow-");
let link: LinkPaths;
let dbCount = 0;

beforeAll(async () => {
  link = await writeLink(dir.path);
});
afterAll(() => dir[Symbol.dispose]());

const freshDb = () => join(dir.path, `asks-${++dbCount}.db`);

const PAY = { verb: "pay", ...PAY_FIELDS, reason: "renew the domain" };
const ACCOUNT = { verb: "account_create", provider_url: "https://provider.example/signup", identity_handle: "work" };

/** Waits until the wall clock has passed `iso` (the event is the expiry itself). */
async function untilPast(iso: string): Promise<void> {
  const ms = Date.parse(iso) - Date.now() + 5;
  if (ms > 0) await new Promise((r) => setTimeout(r, ms));
}

async function recapOf(ap: ApproverProcess, id: string, from = 0): Promise<string> {
  const m = await ap.out.waitFor(new RegExp(`\\[ask ${id}\\][\\s\\S]*?approve ${id}   or   deny ${id}\\n`), from);
  return m[0];
}

describe("pay and account flows", () => {
  test("pay: the recap shows at once, `approve id` (any case) decides, the agent reads approved + ref", async () => {
    await using ap = await startApprover({ files: approverFiles(link), db: freshDb() });
    await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));

    const asked = await mcp.request(PAY);
    expect(asked.isError).toBe(false);
    const id = asked.sc.approval_id as string;
    expect(id).toMatch(/^[0-9A-HJKMNP-TV-Z]{10}$/);
    expect(asked.sc).toEqual({ approval_id: id, state: "pending", expires_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/) });
    expect(JSON.parse(asked.text)).toEqual(asked.sc);

    // The minutes left are read when the recap is drawn: 10 or, a moment later, 9.
    expect((await recapOf(ap, id)).replace(/in (9|10) min/, "in 10 min")).toBe(
      [
        `[ask ${id}] PAY 19.00 EUR`,
        "  to:        Example Shop",
        "  card:      card-2",
        "  site:      shop.example",
        "  checkout:  https://shop.example/checkout/123",
        "  reason:    (from the agent, unchecked) renew the domain",
        "  expires:   in 10 min",
        "  approving: PAY 19.00 EUR at shop.example",
        `  approve ${id}   or   deny ${id}`,
        "",
      ].join("\n"),
    );
    expect((await mcp.request({ verb: "status", approval_id: id })).sc).toEqual({ approval_id: id, state: "pending" });

    const at = ap.type(`approve ${id.toLowerCase()}`);
    const decided = await ap.out.waitFor(/(.*): approved: (.*)\n {2}(demo-[0-9a-f]{8}): no money moved \(reference approver\)\n/, at);
    expect(decided[1]).toBe(id);
    expect(decided[2]).toBe("PAY 19.00 EUR at shop.example");

    const status = await mcp.request({ verb: "status", approval_id: id });
    expect(status).toEqual({ sc: { approval_id: id, state: "approved", ref: decided[3] }, isError: false, text: JSON.stringify(status.sc) });
    // No agent text in any log line.
    expect(ap.err.text).not.toContain("renew");
    expect(mcp.stderr()).not.toContain("renew");
    expect(mcp.stderr()).not.toContain(decided[3]!);
  });

  test("account_create: `deny ID` decides, the agent reads denied", async () => {
    await using ap = await startApprover({ files: approverFiles(link), db: freshDb() });
    await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));
    const asked = await mcp.request(ACCOUNT);
    const id = asked.sc.approval_id as string;
    const recap = await recapOf(ap, id);
    expect(recap).toStartWith(`[ask ${id}] ACCOUNT at provider.example\n`);
    expect(recap).toContain("  identity:  work\n");
    const at = ap.type(`DENY ${id}`);
    await ap.out.waitFor(new RegExp(`^${id}: denied: ACCOUNT at provider\\.example$`, "m"), at);
    expect((await mcp.request({ verb: "status", approval_id: id })).sc).toEqual({ approval_id: id, state: "denied" });
  });
});

describe("the console", () => {
  test("help, unknown commands, list, show, bad ids, unknown ids, a second decision", async () => {
    await using ap = await startApprover({ files: approverFiles(link), db: freshDb() });
    await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));
    let at = ap.type("list");
    await ap.out.waitFor(/^no pending asks$/m, at);
    at = ap.type("help");
    await ap.out.waitFor(/approve ID +approve a pending ask/, at);
    at = ap.type("launch the rockets");
    await ap.out.waitFor(/^commands:$/m, at);

    const id = (await mcp.request(PAY)).sc.approval_id as string;
    await recapOf(ap, id);
    at = ap.type("list");
    await ap.out.waitFor(new RegExp(`^${id}  PAY 19\\.00 EUR at shop\\.example  expires in (9|10) min$`, "m"), at);
    at = ap.type(`show ${id.toLowerCase()}`);
    await recapOf(ap, id, at);

    at = ap.type("approve not-an-id");
    await ap.out.waitFor(/^not an ask id: /m, at);
    at = ap.type("approve K7Q2M4XZ3A");
    await ap.out.waitFor(/^K7Q2M4XZ3A: no such ask$/m, at);
    at = ap.type(`deny ${id}`);
    await ap.out.waitFor(new RegExp(`^${id}: denied: `, "m"), at);
    at = ap.type(`approve ${id}`);
    await ap.out.waitFor(new RegExp(`^${id}: already decided \\(denied\\)$`, "m"), at);
    expect((await mcp.request({ verb: "status", approval_id: id })).sc.state).toBe("denied");
  });

  test("an ask expires with a short --ttl; deciding it afterwards changes nothing", async () => {
    await using ap = await startApprover({ files: approverFiles(link), db: freshDb(), ttl: "1s" });
    await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));
    const asked = await mcp.request(PAY);
    const id = asked.sc.approval_id as string;
    await recapOf(ap, id);
    await untilPast(asked.sc.expires_at as string);
    expect((await mcp.request({ verb: "status", approval_id: id })).sc).toEqual({ approval_id: id, state: "expired" });
    const at = ap.type(`approve ${id}`);
    await ap.out.waitFor(new RegExp(`^${id}: expired, nothing changed$`, "m"), at);
    expect((await mcp.request({ verb: "status", approval_id: id })).sc.state).toBe("expired");
  });
});

describe("limits", () => {
  test("replay: an id seen before is refused by the approver with 409", async () => {
    await using ap = await startApprover({ files: approverFiles(link), db: freshDb() });
    await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));
    const id = (await mcp.request(PAY)).sc.approval_id as string;
    const tls = { cert: await Bun.file(link.clientCert).text(), key: await Bun.file(link.clientKey).text(), ca: await Bun.file(link.approverCa).text() };
    const { verb: _, ...fields } = PAY;
    const res = await fetch(`${ap.url}/v1/asks/pay`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...fields, approval_id: id, amount: "1.00" }),
      tls,
    });
    expect(res.status).toBe(409);
    expect(await res.text()).toBe('{"error":"ID_ALREADY_USED"}');
  });

  test("the pending cap: the next ask gets PENDING_LIMIT until one is decided", async () => {
    await using ap = await startApprover({ files: approverFiles(link), db: freshDb(), maxPending: 2 });
    await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));
    const first = (await mcp.request(PAY)).sc.approval_id as string;
    expect((await mcp.request(ACCOUNT)).isError).toBe(false);
    const refused = await mcp.request(PAY);
    expect(refused).toEqual({ sc: { error: "PENDING_LIMIT" }, isError: true, text: '{"error":"PENDING_LIMIT"}' });
    const at = ap.type(`deny ${first}`);
    await ap.out.waitFor(/denied: PAY/, at);
    expect((await mcp.request(PAY)).sc.state).toBe("pending");
  });

  test("serve-mcp keeps working across an approver restart (its kept-alive connection is renewed)", async () => {
    const db = freshDb();
    const first = await startApprover({ files: approverFiles(link), db });
    await using mcp = await connectServeMcp(serveMcpEnv(link, first.url));
    expect((await mcp.request(PAY)).sc.state).toBe("pending");
    await first.stop();
    expect((await mcp.request(PAY)).sc).toEqual({ error: "APPROVER_UNREACHABLE" });
    await using again = await startApprover({ files: approverFiles(link), db, listen: `127.0.0.1:${first.port}` });
    expect((await mcp.request(PAY)).sc.state).toBe("pending");
    expect(again.port).toBe(first.port);
  });

  test("a restart keeps pending asks pending (shown again), decisions final and ids refused", async () => {
    const db = freshDb();
    let pendingId: string;
    let approvedId: string;
    let ref: string;
    {
      await using ap = await startApprover({ files: approverFiles(link), db });
      await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));
      approvedId = (await mcp.request(PAY)).sc.approval_id as string;
      pendingId = (await mcp.request(ACCOUNT)).sc.approval_id as string;
      await recapOf(ap, pendingId);
      const at = ap.type(`approve ${approvedId}`);
      ref = (await ap.out.waitFor(/(demo-[0-9a-f]{8}): no money moved/, at))[1]!;
      expect(await ap.stop()).toBe(0);
      expect(ap.err.text).toContain("approver stopped (SIGTERM)");
    }
    await using ap = await startApprover({ files: approverFiles(link), db });
    await using mcp = await connectServeMcp(serveMcpEnv(link, ap.url));
    await recapOf(ap, pendingId);
    expect(ap.out.text).not.toContain(`[ask ${approvedId}]`);
    expect((await mcp.request({ verb: "status", approval_id: approvedId })).sc).toEqual({ approval_id: approvedId, state: "approved", ref });
    expect((await mcp.request({ verb: "status", approval_id: pendingId })).sc).toEqual({ approval_id: pendingId, state: "pending" });
    let at = ap.type(`deny ${approvedId}`);
    await ap.out.waitFor(/already decided \(approved\)/, at);
    at = ap.type(`approve ${pendingId}`);
    await ap.out.waitFor(new RegExp(`^${pendingId}: approved: ACCOUNT`, "m"), at);
    // The ids stay used across the restart.
    await ap.stop();
    using ledger = AskLedger.open(db, () => new Date());
    expect(ledger.create({ kind: "account", approval_id: pendingId, provider_url: "https://p.example/" }, { ttlMs: 1000, maxPending: 10 })).toEqual({
      ok: false,
      code: "ID_ALREADY_USED",
    });
  });
});
