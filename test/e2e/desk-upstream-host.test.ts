// Upstream registration refuses link-local and unspecified addresses (cloud metadata lives at
// 169.254.169.254; 0.0.0.0 and :: reach this host) in every spelling the URL parser accepts,
// unless --allow-upstream-host (or its variable) names the address. Through the compiled desk;
// a refused registration opens no connection at all, and an allowed one here is 0.0.0.0, which
// reaches the fixture on this host's loopback.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { runBinary } from "../helpers/binary.ts";
import { DESK_TOKEN, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);

const tmp = tempDir("desk-upstream-host-");
let fx: UpstreamFixture;

beforeAll(() => {
  fx = startUpstreamFixture();
});

afterAll(async () => {
  await fx.stop();
  tmp[Symbol.dispose]();
});

test("link-local and unspecified upstreams are refused in every spelling; loopback is not", async () => {
  const desk = await startDeskProcess(join(tmp.path, "refuse"));
  try {
    const refused = [
      "http://169.254.169.254/mcp",
      "http://2852039166/mcp",
      "http://0xa9.0xfe.0xa9.0xfe/mcp",
      "http://169.254.1/mcp",
      "http://[::ffff:169.254.169.254]/mcp",
      "http://[fe80::1]/mcp",
      "http://[febf::1]/mcp",
      `http://0.0.0.0:${fx.port}/mcp`,
      `http://0:${fx.port}/mcp`,
      "http://[::]/mcp",
      "http://[::ffff:0.0.0.0]/mcp",
    ];
    for (const [i, url] of refused.entries()) {
      const r = await desk.admin("POST", "/admin/upstreams", { name: `u${i}`, url });
      expect([url, r.status, await r.json()]).toEqual([url, 403, { error: "UPSTREAM_HOST_REFUSED" }]);
    }
    expect(fx.totalCalls()).toBe(0);
    expect((await desk.admin("POST", "/admin/upstreams", { name: "loop", url: fx.url })).status).toBe(201);
  } finally {
    await desk.stop();
  }
});

test("--allow-upstream-host, or ASK_ONLY_DESK_ALLOW_UPSTREAM_HOST, names the address that may be used", async () => {
  const zero = `http://0.0.0.0:${fx.port}/mcp`;
  const byFlag = await startDeskProcess(join(tmp.path, "flag"), ["--allow-upstream-host", "0.0.0.0", "--allow-upstream-host", "fe80::1"]);
  try {
    expect((await byFlag.admin("POST", "/admin/upstreams", { name: "zero", url: zero })).status).toBe(201);
    // Only what was named: another link-local address stays refused.
    expect(await (await byFlag.admin("POST", "/admin/upstreams", { name: "meta", url: "http://169.254.169.254/mcp" })).json()).toEqual({
      error: "UPSTREAM_HOST_REFUSED",
    });
  } finally {
    await byFlag.stop();
  }
  const byEnv = await startDeskProcess(join(tmp.path, "env"), [], {
    env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_ALLOW_UPSTREAM_HOST: "169.254.1.1, 0.0.0.0" },
  });
  try {
    expect((await byEnv.admin("POST", "/admin/upstreams", { name: "zero", url: zero })).status).toBe(201);
  } finally {
    await byEnv.stop();
  }
});

test("an --allow-upstream-host value that is no link-local or unspecified address is a usage error", async () => {
  for (const value of ["example.com", "127.0.0.1", "10.0.0.1", "not an address"]) {
    const r = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", join(tmp.path, "bad"), "--allow-upstream-host", value], {
      env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN },
    });
    expect(r).toEqual({
      code: 2,
      stdout: "",
      stderr: `ask-only: error: --allow-upstream-host ${value} is not a link-local or unspecified address\nask-only: hint: e.g. --allow-upstream-host 169.254.169.254; run 'ask-only desk --help' for usage\n`,
    });
  }
});
