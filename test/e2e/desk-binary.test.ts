// The compiled desk as real processes: first start (files, token, kid), unsafe configuration,
// a paid call whose saved response `ask-only verify-receipt` accepts and whose tampered copies it
// refuses, and kill -9 during an upstream call followed by a restart and `desk check`.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateSigningKey, jwksOf } from "../../src/core/receipt/index.ts";
import { runBinary } from "../helpers/binary.ts";
import { callTool, type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";

const TOKEN = "e2e-admin-token-abcdefghijklmnopqrstuvwxyz012345";

const startDesk = (data: string, extraArgs: string[] = [], env: Record<string, string> = { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN }, token = TOKEN) =>
  startDeskProcess(data, extraArgs, { env, token });

async function setUp(desk: DeskProcess, fxUrl: string, allow: string[]) {
  expect((await desk.admin("POST", "/admin/upstreams", { name: "fx", url: fxUrl })).status).toBe(201);
  for (const tool of allow) expect((await desk.admin("PUT", `/admin/tools/${tool}`, { price_mc: 2500, upstream_cost_mc: 1000 })).status).toBe(200);
  const org = (await (await desk.admin("POST", "/admin/orgs", { name: "e2e" })).json()) as { org_id: string };
  const key = (await (await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10_000, reset: "none", allow })).json()) as {
    key_id: string;
    secret: string;
  };
  return { orgId: org.org_id, ...key };
}

let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(async () => {
  await fx.stop();
});

describe("ask-only desk (binary)", () => {
  test("first start makes private files, prints the kid and a generated admin token once", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "desk-data");
    const first = await startDesk(data, [], {}, "unused");
    await first.stop();
    const token = /admin token \(shown once; only its hash is stored\): ([A-Za-z0-9_-]{43})\n/.exec(first.stdout())?.[1];
    expect(token).toBeDefined();
    expect(first.stdout()).toMatch(/receipt signing key: kid [A-Za-z0-9_-]{43}\n/);
    for (const f of ["desk.db", "receipt-signing.key", "sealing.key"]) expect((statSync(join(data, f)).mode & 0o777).toString(8)).toBe("600");
    expect(statSync(join(data, "sealing.key")).size).toBe(32);
    // Only the token's hash is stored: the token itself is in no file of the data directory.
    for (const file of readdirSync(data)) expect(`${file}: ${readFileSync(join(data, file)).includes(token!)}`).toBe(`${file}: false`);

    const second = await startDesk(data, [], {}, token!);
    expect((await second.admin("GET", "/admin/orgs")).status).toBe(200);
    expect((await fetch(`${second.url}/admin/orgs`, { headers: { authorization: "Bearer nope" } })).status).toBe(401);
    expect(await second.stop()).toBe(0);
    expect(second.stdout()).not.toContain("admin token");
    expect(second.stdout()).toContain(
      first
        .stdout()
        .split("\n")
        .find((l) => l.startsWith("receipt signing key"))!,
    );
  });

  test("unsafe configuration stops the desk before it listens", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const short = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: "short" } });
    expect(short.code).toBe(1);
    expect(short.stdout).toBe("");
    expect(short.stderr).toContain("ask-only: error: the admin token from ASK_ONLY_DESK_ADMIN_TOKEN is shorter than 32 characters");
    expect(short.stderr).toContain("ask-only: hint: ");
    expect(short.stderr).not.toContain("listening");

    const ok = await startDesk(data);
    await ok.stop();
    chmodSync(join(data, "sealing.key"), 0o644);
    const open = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN } });
    expect(open.code).toBe(1);
    expect(open.stderr).toContain("sealing.key is readable by others (mode 0644)");
    expect(open.stderr).toContain("ask-only: hint: run: chmod 600");

    const bad = await runBinary(["desk", "--listen", "nowhere", "--data", data], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--listen nowhere is not HOST:PORT");
  });

  test("a paid call saved to a file verifies offline; tampered copies fail the matching check", async () => {
    await using tmp = tempDir();
    const desk = await startDesk(join(tmp.path, "d"));
    try {
      const k = await setUp(desk, fx.url, ["fx__echo"]);
      const args = { text: "the answer is 42" };
      const r = await fetch(`${desk.url}/v1/tools/fx__echo`, {
        method: "POST",
        headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json" },
        body: JSON.stringify(args),
      });
      expect(r.status).toBe(200);
      const saved = await r.text();
      const jwks = await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text();
      const file = (name: string, text: string) => {
        const p = join(tmp.path, name);
        writeFileSync(p, text);
        return p;
      };
      const keys = file("jwks.json", jwks);
      const argsFile = file("args.json", JSON.stringify(args));
      const good = await runBinary(["verify-receipt", file("response.json", saved), "--keys", keys, "--args", argsFile]);
      expect(good.code).toBe(0);
      expect(good.stderr).toBe("");

      const body = JSON.parse(saved);
      const amountDigit = structuredClone(body);
      amountDigit.receipt.receipt.amount_mc = 2501;
      const answerChar = structuredClone(body);
      answerChar.result.content[0].text = "the answer is 43";
      const cases: [string, string, string[], RegExp][] = [
        ["amount", JSON.stringify(amountDigit), ["--args", argsFile], /^FAILED readable copy: .*amount_mc/m],
        ["answer", JSON.stringify(answerChar), ["--args", argsFile], /^FAILED result/m],
        ["arguments", saved, ["--args", file("args2.json", JSON.stringify({ text: "the answer is 41" }))], /^FAILED params/m],
      ];
      for (const [name, text, extra, re] of cases) {
        const bad = await runBinary(["verify-receipt", file(`${name}.json`, text), "--keys", keys, ...extra]);
        expect(`${name}: ${bad.code}`).toBe(`${name}: 1`);
        expect(bad.stdout + bad.stderr).toMatch(re);
      }
      const other = generateSigningKey();
      const otherKeys = file("other.json", JSON.stringify(jwksOf(other.publicJwk)));
      const wrongKey = await runBinary(["verify-receipt", file("response.json", saved), "--keys", otherKeys]);
      expect(wrongKey.code).toBe(1);
      expect(wrongKey.stdout).toMatch(/^FAILED signature/m);

      const exported = await (await desk.admin("GET", `/admin/receipts?org_id=${k.orgId}`)).text();
      const jsonl = await runBinary(["verify-receipt", "--jsonl", file("export.jsonl", exported), "--keys", keys]);
      expect(jsonl.code).toBe(0);
    } finally {
      expect(await desk.stop()).toBe(0);
    }
  });

  test("a signing-key rotation outlives a restart: the old key never signs again, and receipts of both keys verify", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const desk = await startDesk(data);
    const k = await setUp(desk, fx.url, ["fx__echo"]);
    const pay = async (url: string) => (await callTool(url, k.secret, "fx__echo", { text: "hi" })).json() as Promise<{ receipt: { kid: string } }>;
    const before = await pay(desk.url);
    const rot = (await (await desk.admin("POST", "/admin/signing-key/rotate")).json()) as { kid: string; retired_kid: string };
    expect(rot.retired_kid).toBe(before.receipt.kid);
    expect(await desk.stop()).toBe(0);
    // A rotation is made because the old key may be out: a restart must not bring it back.
    expect((statSync(join(data, "receipt-signing.key")).mode & 0o777).toString(8)).toBe("600");
    const again = await startDesk(data);
    try {
      const after = await pay(again.url);
      expect(after.receipt.kid).toBe(rot.kid);
      const jwks = (await (await fetch(`${again.url}/.well-known/receipt-signing-key.json`)).json()) as { keys: { kid: string }[] };
      expect(jwks.keys.map((x) => x.kid)).toEqual([rot.kid, before.receipt.kid]);
      const file = (name: string, value: unknown) => {
        const path = join(tmp.path, name);
        writeFileSync(path, JSON.stringify(value));
        return path;
      };
      const keys = file("jwks.json", jwks);
      for (const saved of [before, after]) expect((await runBinary(["verify-receipt", file("r.json", saved), "--keys", keys])).code).toBe(0);
    } finally {
      expect(await again.stop()).toBe(0);
    }
    expect(again.stdout()).toContain(`receipt signing key: kid ${rot.kid}\n`);
  });

  test("kill -9 during an upstream call: the restart refunds it as refunded_abandoned and desk check passes", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const desk = await startDesk(data);
    const k = await setUp(desk, fx.url, ["fx__echo", "fx__hang"]);
    const ok = await fetch(`${desk.url}/v1/tools/fx__echo`, {
      method: "POST",
      headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "before the crash" }),
    });
    expect(ok.status).toBe(200);
    const hangingBefore = fx.hanging();
    const inFlight = fetch(`${desk.url}/v1/tools/fx__hang`, {
      method: "POST",
      headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json" },
      body: "{}",
    }).catch((err: unknown) => err);
    await fx.whenHanging(hangingBefore + 1);
    desk.proc.kill(9);
    expect(await desk.proc.exited).not.toBe(0);
    expect(await inFlight).toBeInstanceOf(Error);

    const again = await startDesk(data);
    try {
      expect(again.stderr()).toContain("refunded 1 abandoned reservation(s)");
      const key = (await (await again.admin("GET", `/admin/keys/${k.key_id}`)).json()) as { spent_mc: number };
      expect(key.spent_mc).toBe(2500);
      const lines = (await (await again.admin("GET", `/admin/receipts?org_id=${k.orgId}`)).text())
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines.map((e) => [e.receipt.seq, e.receipt.outcome, e.receipt.amount_mc])).toEqual([
        [1, "charged", 2500],
        [2, "refunded_abandoned", 0],
      ]);
    } finally {
      expect(await again.stop()).toBe(0);
    }
    const check = await runBinary(["desk", "check", "--data", data]);
    expect(check.stderr).toBe("");
    expect(check.code).toBe(0);
    expect(check.stdout).toContain("ok: for every key and period, spent = charges + open reservations");
    expect(check.stdout).toContain("ok: 2 receipts: signatures, readable copies and 1 key chains intact");
  });

  test("--tls-cert and --tls-key serve HTTPS; a certificate that cannot be read stops the desk", async () => {
    await using tmp = tempDir();
    const certs = join(tmp.path, "certs");
    expect((await runBinary(["certs", certs])).code).toBe(0);
    const desk = await startDesk(join(tmp.path, "d"), ["--tls-cert", join(certs, "approver.pem"), "--tls-key", join(certs, "approver.key")]);
    try {
      expect(desk.url).toStartWith("https://");
      const ca = readFileSync(join(certs, "approver-ca.pem"), "utf8");
      const r = await fetch(`${desk.url}/.well-known/receipt-signing-key.json`, { tls: { ca } });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { keys: unknown[] }).keys).toHaveLength(1);
    } finally {
      expect(await desk.stop()).toBe(0);
    }
    const missing = await runBinary(
      ["desk", "--listen", "127.0.0.1:0", "--data", join(tmp.path, "d"), "--tls-cert", join(certs, "nope.pem"), "--tls-key", join(certs, "approver.key")],
      {
        env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN },
      },
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("ask-only: error: cannot read ");
    expect(missing.stderr).toContain("nope.pem: ENOENT");
    const half = await runBinary(["desk", "--data", join(tmp.path, "d"), "--tls-cert", join(certs, "approver.pem")], {
      env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN },
    });
    expect(half.code).toBe(2);
    expect(half.stderr).toContain("--tls-cert and --tls-key go together");
  });

  test("a sealed upstream credential never shows in the binary's output, its answers or its files", async () => {
    const SECRET = "sk-e2e-CREDENTIAL-0a1b2c3d4e5f6a7b";
    await using paid = startUpstreamFixture({ requireHeader: { name: "authorization", value: `Bearer ${SECRET}` } });
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const desk = await startDesk(data);
    const seen: string[] = [];
    const keep = async (r: Response) => {
      seen.push(await r.text(), JSON.stringify(Object.fromEntries(r.headers as unknown as Iterable<[string, string]>)));
      return r.status;
    };
    try {
      expect(await keep(await desk.admin("POST", "/admin/upstreams", { name: "paid", url: paid.url, headers: { authorization: `Bearer ${SECRET}` } }))).toBe(
        201,
      );
      await keep(await desk.admin("PUT", "/admin/tools/paid__echo", { price_mc: 1, upstream_cost_mc: 0 }));
      const org = (await (await desk.admin("POST", "/admin/orgs", { name: "o" })).json()) as { org_id: string };
      const key = (await (
        await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 10, reset: "none", allow: ["paid__echo", "paid__fail_5xx"] })
      ).json()) as { secret: string };
      for (const tool of ["paid__echo", "paid__fail_5xx"]) {
        const r = await fetch(`${desk.url}/v1/tools/${tool}`, {
          method: "POST",
          headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
          body: tool === "paid__echo" ? '{"text":"hi"}' : "{}",
        });
        await keep(r);
      }
      for (const path of ["/admin/upstreams", "/admin/tools", "/admin/audit", "/admin/receipts"]) await keep(await desk.admin("GET", path));
      expect(paid.seenCredentials).toContain(`Bearer ${SECRET}`);
    } finally {
      expect(await desk.stop()).toBe(0);
    }
    expect(seen.join("\n")).not.toContain(SECRET);
    expect(desk.stdout() + desk.stderr()).not.toContain(SECRET);
    const { readdirSync } = await import("node:fs");
    for (const f of readdirSync(data)) expect(`${f}: ${readFileSync(join(data, f)).includes(Buffer.from(SECRET))}`).toBe(`${f}: false`);

    // Another sealing key cannot open the stored credential: the desk refuses to start.
    writeFileSync(join(data, "sealing.key"), new Uint8Array(32).fill(1), { mode: 0o600 });
    const wrongKey = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN } });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toContain("ask-only: error: the sealed credential field header:authorization of upstream paid does not open\n");
    expect(wrongKey.stderr).toContain("sealing.key must be the key they were sealed with");
    expect(wrongKey.stderr).not.toContain("listening");
  });

  test("desk check exits 1 and names the problem when the money does not add up", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const desk = await startDesk(data);
    const k = await setUp(desk, fx.url, ["fx__echo"]);
    await fetch(`${desk.url}/v1/tools/fx__echo`, {
      method: "POST",
      headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "x" }),
    });
    await desk.stop();
    const { Database } = await import("bun:sqlite");
    const db = new Database(join(data, "desk.db"));
    db.run("UPDATE spend SET spent_mc = spent_mc + 1");
    db.close();
    const check = await runBinary(["desk", "check", "--data", data]);
    expect(check.code).toBe(1);
    expect(check.stdout).toContain(`FAILED: key ${k.key_id} period none: spent 2501 mc, but charges 2500 + open reservations 0`);
    expect(check.stderr).toBe("ask-only: error: the desk ledger has 2 problem(s)\n");
    expect(readFileSync(join(data, "desk.db")).length).toBeGreaterThan(0);
  });
});
