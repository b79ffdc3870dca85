// A REST upstream behind the compiled desk, as a person runs it: registered from its OpenAPI
// document with a bearer credential, a paid call whose saved response `ask-only verify-receipt`
// accepts, then `kill -9` and a restart on the same data directory: the tool is served again
// from its stored operation with the credential still carried, `desk check` passes, and the
// token is in no file of the data directory and no output of the desk.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { adminJson, callTool, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";
import { REST_DOCUMENT, type RestFixture, startRestFixture } from "../fixtures/rest-server.ts";

const TOKEN = "e2e-rest-admin-token-abcdefghijklmnopqrstuvwxyz0123";
const BEARER = `rest-upstream-bearer-${crypto.randomUUID()}`;
const tmp = tempDir("desk-rest-bin-");
const data = join(tmp.path, "d");
let fixture: RestFixture;

beforeAll(() => {
  fixture = startRestFixture();
});
afterAll(async () => {
  await fixture.stop();
  tmp[Symbol.dispose]();
});

const start = () => startDeskProcess(data, [], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN }, token: TOKEN });

test("registered, called, receipt verified by the binary; after kill -9 and a restart the tool is served again with its credential", async () => {
  const output: string[] = [];
  let desk = await start();
  let secret: string;
  const args = { id: "42" };
  try {
    const reg = await adminJson(desk, "POST", "/admin/upstreams", {
      name: "items",
      base_url: `${fixture.url}/api/v1`,
      openapi: REST_DOCUMENT,
      auth: { type: "bearer", token: BEARER },
    });
    expect(reg).toMatchObject({ kind: "rest", auth: { type: "bearer", state: "ok" } });
    await adminJson(desk, "PUT", "/admin/tools/items__getItem", { price_mc: 300, upstream_cost_mc: 100 });
    const org = (await adminJson(desk, "POST", "/admin/orgs", { name: "e2e" })).org_id as string;
    secret = (await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 10_000, reset: "none", allow: ["items__getItem"] })).secret as string;

    const from = fixture.seen.length;
    const r = await callTool(desk.url, secret, "items__getItem", args);
    expect(r.status).toBe(200);
    const saved = await r.text();
    expect(fixture.seen.slice(from).map((s) => [s.target, s.headers.get("authorization")])).toEqual([["/api/v1/items/42", `Bearer ${BEARER}`]]);
    const file = (name: string, text: string) => {
      const p = join(tmp.path, name);
      writeFileSync(p, text);
      return p;
    };
    const keys = file("jwks.json", await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text());
    const verified = await runBinary(["verify-receipt", file("response.json", saved), "--keys", keys, "--args", file("args.json", JSON.stringify(args))]);
    expect({ code: verified.code, stderr: verified.stderr }).toEqual({ code: 0, stderr: "" });
    expect(verified.stdout).toContain("ok   result (matches result_sha256)");
    const tampered = await runBinary(["verify-receipt", file("tampered.json", saved.replace('"id":"42"', '"id":"43"')), "--keys", keys]);
    expect(tampered.code).toBe(1);
  } finally {
    expect(await desk.kill()).not.toBe(0);
    output.push(desk.stdout(), desk.stderr());
  }

  desk = await start();
  try {
    const from = fixture.seen.length;
    const again = await callTool(desk.url, secret, "items__getItem", { id: "7" });
    expect(again.status).toBe(200);
    expect(again.headers.get("x-clearing-outcome")).toBe("charged");
    expect(fixture.seen.slice(from).map((s) => s.headers.get("authorization"))).toEqual([`Bearer ${BEARER}`]);
    const refused = await callTool(desk.url, secret, "items__getItem", { id: ".." });
    expect(refused.status).toBe(400);
    expect(fixture.seen.length - from).toBe(1);
  } finally {
    expect(await desk.stop()).toBe(0);
    output.push(desk.stdout(), desk.stderr());
  }
  const check = await runBinary(["desk", "check", "--data", data]);
  expect(check.code).toBe(0);
  for (const text of output) expect(text).not.toContain(BEARER);
  for (const f of readdirSync(data)) expect(`${f}: ${readFileSync(join(data, f)).includes(Buffer.from(BEARER))}`).toBe(`${f}: false`);
});
