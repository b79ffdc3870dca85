// Both processes refuse to start on bad settings or files, before listening or serving, with an
// error and a hint; and the running approver refuses clients without the right certificate.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { approverFiles, type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { approverArgs, OutputWatch, startApprover } from "../helpers/approver-process.ts";
import { BINARY, runBinary } from "../helpers/binary.ts";
import { makeLinkPems } from "../helpers/certs.ts";
import { serveMcpEnv } from "../helpers/mcp-client.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);
const dir = tempDir("ask-only-startup-");
let link: LinkPaths;
let other: LinkPaths;

beforeAll(async () => {
  link = await writeLink(dir.path);
  const otherDir = join(dir.path, "other");
  await Bun.write(join(otherDir, ".keep"), "");
  other = await writeLink(otherDir, await makeLinkPems());
}, 30_000);
afterAll(() => dir[Symbol.dispose]());

function expectRefusal(r: { code: number; stdout: string; stderr: string }, code: number, message: RegExp) {
  expect(r.code).toBe(code);
  expect(r.stdout).toBe("");
  const lines = r.stderr.trimEnd().split("\n");
  expect(lines[0]).toMatch(/^ask-only: error: /);
  expect(lines[0]).toMatch(message);
  expect(lines[1]).toMatch(/^ask-only: hint: /);
  expect(r.stderr).not.toContain("listening");
  expect(r.stderr).not.toContain("ready");
}

describe("approver start-up", () => {
  const db = () => join(dir.path, "refused.db");
  test("missing, unreadable, mismatched or swapped files: exit 1 before listening", async () => {
    const good = approverFiles(link);
    const cases: [Partial<typeof good>, RegExp][] = [
      [{ cert: join(dir.path, "missing.pem") }, /cannot read the certificate .*missing\.pem \(--cert\): ENOENT/],
      [{ key: link.clientKey }, /does not match the certificate/],
      [{ key: other.approverKey }, /does not match the certificate/],
      [{ ca: link.approverCa }, /is the CA that signed/],
      [{ ca: link.clientCert }, /is not a CA certificate/],
      [{ cert: link.approverKey }, /is not a PEM certificate/],
    ];
    for (const [over, message] of cases) {
      const r = await runBinary(approverArgs({ files: { ...good, ...over }, db: db() }));
      expectRefusal(r, 1, message);
    }
    expect(existsSync(db())).toBe(false);
  });

  test("files from the environment; the flag wins; the error names where a file came from", async () => {
    const env = { ASK_ONLY_PAY_APPROVER_CERT: link.approverCert, ASK_ONLY_PAY_APPROVER_KEY: link.clientKey, ASK_ONLY_PAY_APPROVER_CA: link.clientCa };
    const r = await runBinary(["approver", "--listen", "127.0.0.1:0", "--db", db()], { env });
    expectRefusal(r, 1, /\(ASK_ONLY_PAY_APPROVER_KEY\) does not match/);
    await using ap = await startApprover({ files: approverFiles(link), db: join(dir.path, "env.db"), env });
    await ap.err.waitFor(/ask ledger:/);
  });

  test("bad flags are usage errors (exit 2)", async () => {
    const base = approverArgs({ files: approverFiles(link), db: db() });
    for (const [flag, value] of [
      ["--ttl", "10"],
      ["--ttl", "-1m"],
      ["--ttl", "8d"],
      ["--max-pending", "0"],
      ["--max-pending", "ten"],
      ["--listen", "8443"],
      ["--listen", "[zz]:1"],
      ["--max-amount", "0"],
      ["--max-amount", "1e6"],
      ["--max-amount", "1000000000"],
    ] as const) {
      const r = await runBinary([...base, flag, value]);
      expectRefusal(r, 2, new RegExp(flag));
    }
    const r = await runBinary(["approver", "--listen", "127.0.0.1:0", "--db", db()], { env: {} });
    // A missing certificate stops it like an unreadable one: exit 1, before listening.
    expectRefusal(r, 1, /--cert is missing/);
    expectRefusal(await runBinary(base, { env: { ASK_ONLY_PAY_APPROVER_MAX_PENDING: "many" } }), 2, /--max-pending "many"/);
  });

  test("the other settings come from the environment too; a flag wins", async () => {
    const env = { ASK_ONLY_PAY_APPROVER_TTL: "90s", ASK_ONLY_PAY_APPROVER_MAX_PENDING: "7", ASK_ONLY_PAY_APPROVER_MAX_AMOUNT: "250" };
    {
      await using ap = await startApprover({ files: approverFiles(link), db: join(dir.path, "env1.db"), env });
      await ap.err.waitFor(/asks wait 90s for a decision; at most 7 pending; amounts up to 250/);
    }
    await using ap = await startApprover({ files: approverFiles(link), db: join(dir.path, "env2.db"), env, ttl: "1h" });
    await ap.err.waitFor(/asks wait 1h for a decision; at most 7 pending/);
  });

  test("a port in use is refused with a hint", async () => {
    await using first = await startApprover({ files: approverFiles(link), db: join(dir.path, "a.db") });
    const r = await runBinary(approverArgs({ files: approverFiles(link), db: join(dir.path, "b.db"), listen: `127.0.0.1:${first.port}` }));
    expectRefusal(r, 1, /cannot listen on 127\.0\.0\.1:\d+/);
  });

  test("start-up says where it listens, the ledger and the client CA it trusts; the default ledger is 0700", async () => {
    const state = join(dir.path, "state");
    const files = approverFiles(link);
    const proc = Bun.spawn([BINARY, "approver", "--cert", files.cert, "--key", files.key, "--ca", files.ca, "--listen", "127.0.0.1:0"], {
      env: { PATH: "/usr/bin:/bin", HOME: dir.path, XDG_STATE_HOME: state, NO_COLOR: "1" },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const err = new OutputWatch(proc.stderr);
    await err.waitFor(/type "help"/);
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    expect(err.text).toMatch(/approver listening on https:\/\/127\.0\.0\.1:\d+ \(mutual TLS only\)/);
    expect(err.text).toContain(`ask ledger: ${join(state, "ask-only", "asks.db")}`);
    expect(err.text).toContain(`trusting clients certified by CN=ask-only client CA, O=ask-only (${files.ca}, sha256 `);
    expect(err.text).toContain("asks wait 10m for a decision; at most 50 pending");
    expect(statSync(join(state, "ask-only")).mode & 0o777).toBe(0o700);
  });
});

describe("serve-mcp start-up", () => {
  const url = "https://localhost:1";
  test("missing or invalid settings and files: exit 1 before serving, stdout empty", async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ ASK_ONLY_PAY_URL: "" }, /ASK_ONLY_PAY_URL is not set/],
      [{ ASK_ONLY_PAY_URL: "http://localhost:8443" }, /must be an https URL/],
      [{ ASK_ONLY_PAY_URL: "https://user:pw@localhost:8443" }, /must be an https URL/],
      [{ ASK_ONLY_PAY_URL: "not a url" }, /not a URL/],
      [{ ASK_ONLY_PAY_CLIENT_KEY: "" }, /ASK_ONLY_PAY_CLIENT_KEY is not set/],
      [{ ASK_ONLY_PAY_CLIENT_KEY: link.approverKey }, /\(ASK_ONLY_PAY_CLIENT_KEY\) does not match/],
      [{ ASK_ONLY_PAY_CLIENT_CERT: join(dir.path, "nope.pem") }, /cannot read the certificate .*\(ASK_ONLY_PAY_CLIENT_CERT\): ENOENT/],
      [{ ASK_ONLY_PAY_CA: link.clientCa }, /is the CA that signed/],
      [{ ASK_ONLY_PAY_TIMEOUT_MS: "soon" }, /ASK_ONLY_PAY_TIMEOUT_MS/],
      [{ ASK_ONLY_PAY_MAX_AMOUNT: "1e9" }, /ASK_ONLY_PAY_MAX_AMOUNT is not an amount/],
    ];
    for (const [over, message] of cases) {
      const r = await runBinary(["serve-mcp"], { env: serveMcpEnv(link, url, over), stdin: "" });
      expectRefusal(r, 1, message);
    }
  });
});

describe("the running approver refuses clients before any handler", () => {
  test("no certificate, another CA's certificate, the approver's own certificate", async () => {
    const db = join(dir.path, "mtls.db");
    await using ap = await startApprover({ files: approverFiles(link), db });
    const read = (p: string) => Bun.file(p).text();
    const body = JSON.stringify({
      approval_id: "K7Q2M4XZ3A",
      merchant: "Example Shop",
      amount: "19.00",
      currency: "EUR",
      card_handle: "card-2",
      checkout_url: "https://shop.example/",
    });
    const attempts = [
      { ca: await read(link.approverCa) },
      { cert: await read(other.clientCert), key: await read(other.clientKey), ca: await read(link.approverCa) },
      { cert: await read(link.approverCert), key: await read(link.approverKey), ca: await read(link.approverCa) },
    ];
    for (const tls of attempts) {
      await expect(
        fetch(`${ap.url}/v1/asks/pay`, { method: "POST", headers: { "content-type": "application/json" }, body, tls, keepalive: false }),
      ).rejects.toThrow();
    }
    await ap.stop();
    using ledger = AskLedger.open(db, () => new Date());
    expect(ledger.get("K7Q2M4XZ3A")).toBeUndefined();
    expect(ap.out.text).not.toContain("K7Q2M4XZ3A");
  });
});
