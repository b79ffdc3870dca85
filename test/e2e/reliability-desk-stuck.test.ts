// The desk (the compiled binary) in front of upstreams that stop answering: one that accepts the
// connection and never sends a byte, one that sends its answer a byte at a time. Each is a TCP
// proxy in front of the fixture upstream: it passes traffic while the desk registers the
// upstream, then turns stuck for every new connection. The agent gets 504 UPSTREAM_TIMEOUT with
// a signed refunded_timeout receipt within --upstream-timeout (plus scheduling slack), nothing
// is charged, and meanwhile the desk keeps answering another key's calls to a healthy upstream.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { MAX_EXCHANGES_PER_UPSTREAM } from "../../src/core/upstream/slots.ts";
import { type Envelope, openEnvelope, type Jwks } from "../../src/core/receipt/index.ts";
import { runBinary } from "../helpers/binary.ts";
import { adminJson, callTool, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";

setDefaultTimeout(30_000);
const TIMEOUT_MS = 1_000;
/** Scheduling slack on a shared 2-core machine: the timeout plus this is the bound. */
const SLACK_MS = 1_500;
/** One byte of the answer every this many milliseconds: a whole answer would take many seconds. */
const DRIP_EVERY_MS = 40;

type Mode = "pass" | "silent" | "dribble";

type StallingProxy = {
  port: number;
  /** Connections from now on behave this way; the open ones are closed (and gone when this resolves). */
  setMode(mode: Mode): Promise<void>;
  stats: { silentConnections: number; bytesIntoSilence: number; dribbleConnections: number; bytesDribbled: number; peakSilentOpen: number };
  /** Resolves when `n` silent connections are open at once. */
  whenSilentAtLeast(n: number): Promise<void>;
  /** Silent connections still open. */
  openSilent(): number;
  /** Resolves when every silent connection is closed, rejects when `withinMs` pass first. */
  whenSilentClosed(withinMs: number): Promise<void>;
  close(): void;
};

/** A TCP proxy to `targetPort` on 127.0.0.1 whose new connections pass, stay silent or dribble. */
function stallingProxy(targetPort: number): Promise<StallingProxy> {
  let mode: Mode = "pass";
  const open = new Set<Socket>();
  const timers = new Set<ReturnType<typeof setInterval>>();
  const stats = { silentConnections: 0, bytesIntoSilence: 0, dribbleConnections: 0, bytesDribbled: 0, peakSilentOpen: 0 };
  const silentOpen = new Set<Socket>();
  const silentWaiters: (() => void)[] = [];
  let atLeast: { n: number; wake: () => void }[] = [];
  const track = (s: Socket) => {
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
  };
  const server: Server = createServer((client) => {
    track(client);
    if (mode === "silent") {
      // Accepted, read, never answered: not a status line, not a header, not a byte.
      stats.silentConnections++;
      silentOpen.add(client);
      stats.peakSilentOpen = Math.max(stats.peakSilentOpen, silentOpen.size);
      for (const w of atLeast.filter((w) => silentOpen.size >= w.n)) w.wake();
      atLeast = atLeast.filter((w) => silentOpen.size < w.n);
      client.on("close", () => {
        silentOpen.delete(client);
        if (silentOpen.size === 0) for (const w of silentWaiters.splice(0)) w();
      });
      client.on("data", (d: Buffer) => {
        stats.bytesIntoSilence += d.length;
      });
      return;
    }
    const upstream = connect(targetPort, "127.0.0.1");
    track(upstream);
    client.pipe(upstream);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    if (mode === "pass") {
      upstream.pipe(client);
      return;
    }
    stats.dribbleConnections++;
    const pending: number[] = [];
    upstream.on("data", (d: Buffer) => pending.push(...d));
    const timer = setInterval(() => {
      const byte = pending.shift();
      if (byte === undefined || client.destroyed) return;
      client.write(Buffer.from([byte]));
      stats.bytesDribbled++;
    }, DRIP_EVERY_MS);
    timers.add(timer);
    client.on("close", () => {
      clearInterval(timer);
      timers.delete(timer);
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as { port: number }).port,
        stats,
        async setMode(next) {
          mode = next;
          const closing = [...open].map((s) => new Promise<void>((done) => (s.destroyed ? done() : s.once("close", () => done()))));
          for (const s of open) s.destroy();
          await Promise.all(closing);
        },
        openSilent: () => silentOpen.size,
        whenSilentAtLeast: (n) =>
          new Promise<void>((wake) => {
            if (silentOpen.size >= n) wake();
            else atLeast.push({ n, wake });
          }),
        whenSilentClosed: (withinMs) =>
          new Promise<void>((resolve, reject) => {
            if (silentOpen.size === 0) return resolve();
            const timer = setTimeout(() => reject(new Error(`${silentOpen.size} silent connections still open after ${withinMs} ms`)), withinMs);
            silentWaiters.push(() => {
              clearTimeout(timer);
              resolve();
            });
          }),
        close() {
          for (const t of timers) clearInterval(t);
          for (const s of open) s.destroy();
          server.close();
        },
      }),
    ),
  );
}

/** A fresh key of the test's org allowed `tool` (the first desk's secrets stay with that test). */
async function stuckSecretOf(desk: Awaited<ReturnType<typeof startDeskProcess>>, tool: string): Promise<string> {
  const orgs = (await (await desk.admin("GET", "/admin/orgs")).json()) as { org_id: string }[];
  const key = await adminJson(desk, "POST", "/admin/keys", { org_id: orgs[0]!.org_id, budget_mc: 10_000, reset: "none", allow: [tool] });
  return key.secret as string;
}

/** One REST call on a socket of its own (HTTP/1.1 by hand), outside this process's fetch pool. */
function rawCall(deskUrl: string, secret: string, tool: string, args: unknown): Promise<{ status: number; ms: number }> {
  const { hostname, port } = new URL(deskUrl);
  const body = JSON.stringify(args);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    let text = "";
    const socket = connect(Number(port), hostname, () => {
      socket.write(
        `POST /v1/tools/${tool} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${secret}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    });
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const m = /^HTTP\/1\.1 (\d{3}) /.exec(text);
      if (m) resolve({ status: Number(m[1]), ms: performance.now() - t0 });
      else reject(new Error(`no HTTP answer: ${text.slice(0, 200)}`));
    });
  });
}

let fx: UpstreamFixture;
const proxies: StallingProxy[] = [];
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(async () => {
  for (const p of proxies) p.close();
  await fx.stop();
});

describe("the desk against stuck and dribbling upstreams (binary)", () => {
  test("UPSTREAM_TIMEOUT with a refunded_timeout receipt within the timeout, while other keys' calls keep clearing", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const silent = await stallingProxy(fx.port);
    const drip = await stallingProxy(fx.port);
    proxies.push(silent, drip);
    const desk = await startDeskProcess(data, ["--upstream-timeout", String(TIMEOUT_MS / 1000)]);
    try {
      await adminJson(desk, "POST", "/admin/upstreams", { name: "fast", url: fx.url });
      await adminJson(desk, "POST", "/admin/upstreams", { name: "silent", url: `http://127.0.0.1:${silent.port}/mcp` });
      await adminJson(desk, "POST", "/admin/upstreams", { name: "drip", url: `http://127.0.0.1:${drip.port}/mcp` });
      for (const tool of ["fast__echo", "silent__echo", "drip__echo"]) {
        await adminJson(desk, "PUT", `/admin/tools/${tool}`, { price_mc: 1_000, upstream_cost_mc: 100 });
      }
      const org = (await adminJson(desk, "POST", "/admin/orgs", { name: "stuck" })).org_id as string;
      const stuckKey = await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 100_000, reset: "none", allow: ["silent__echo", "drip__echo"] });
      const fastKey = await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 10_000_000, reset: "daily", allow: ["fast__echo"] });
      const stuckSecret = stuckKey.secret as string;
      const fastSecret = fastKey.secret as string;

      // While the proxies pass traffic, both upstreams answer (sessions and connections warm).
      for (const tool of ["silent__echo", "drip__echo"]) expect((await callTool(desk.url, stuckSecret, tool, { text: "warm" })).status).toBe(200);
      await silent.setMode("silent");
      await drip.setMode("dribble");

      const STUCK = 4;
      const started = performance.now();
      let firstStuckEnd = Number.POSITIVE_INFINITY;
      const stuck = Array.from({ length: 2 * STUCK }, async (_, i) => {
        const r = await callTool(desk.url, stuckSecret, i % 2 === 0 ? "silent__echo" : "drip__echo", { text: `stuck ${i}` });
        const elapsed = performance.now() - started;
        firstStuckEnd = Math.min(firstStuckEnd, performance.now());
        return { status: r.status, headers: r.headers, body: (await r.json()) as { error: string; receipt: Envelope }, elapsed };
      });

      // Meanwhile: another key's calls to the healthy upstream, 4 at a time, until the stuck ones end.
      const fastDone: number[] = [];
      const stuckAll = Promise.all(stuck);
      let stuckOver = false;
      stuckAll.finally(() => {
        stuckOver = true;
      });
      await Promise.all(
        Array.from({ length: 4 }, async (_, w) => {
          for (let n = 0; !stuckOver; n++) {
            const r = await callTool(desk.url, fastSecret, "fast__echo", { text: `fast ${w}-${n}` });
            expect(r.status).toBe(200);
            await r.arrayBuffer();
            fastDone.push(performance.now());
          }
        }),
      );
      const results = await stuckAll;

      const jwks = (await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).json()) as Jwks;
      for (const r of results) {
        expect(r.status).toBe(504);
        expect(r.body.error).toBe("UPSTREAM_TIMEOUT");
        expect(r.headers.get("x-clearing-outcome")).toBe("refunded_timeout");
        expect(r.elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
        expect(r.elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
        const opened = openEnvelope(r.body.receipt, jwks);
        expect(opened.checks.every((c) => c.ok)).toBe(true);
        expect(opened.signed?.outcome).toBe("refunded_timeout");
        expect(opened.signed?.amount_mc).toBe(0);
        expect(opened.signed?.http_status).toBe(504);
      }
      // The healthy upstream kept clearing while the stuck calls waited.
      const whileStuck = fastDone.filter((t) => t < firstStuckEnd).length;
      expect(whileStuck).toBeGreaterThanOrEqual(20);

      // The desk really met silence and a dribble (the test is not passing on a fast failure).
      expect(silent.stats.silentConnections).toBeGreaterThan(0);
      expect(silent.stats.bytesIntoSilence).toBeGreaterThan(0);
      expect(drip.stats.dribbleConnections).toBeGreaterThan(0);
      expect(drip.stats.bytesDribbled).toBeGreaterThan(0);

      const k = await adminJson(desk, "GET", `/admin/keys/${stuckKey.key_id}`);
      expect(k.spent_mc).toBe(2_000);
    } finally {
      expect(await desk.stop()).toBe(0);
    }

    // A restarted desk has no session yet: its MCP handshake meets the silence and the dribble.
    const again = await startDeskProcess(data, ["--upstream-timeout", String(TIMEOUT_MS / 1000)]);
    try {
      const secrets = [await stuckSecretOf(again, "silent__echo"), await stuckSecretOf(again, "drip__echo"), await stuckSecretOf(again, "fast__echo")];
      const t0 = performance.now();
      const call = (tool: string, i: number) => callTool(again.url, secrets[i]!, tool, { text: "after restart" });
      const [s, d, fast] = await Promise.all([call("silent__echo", 0), call("drip__echo", 1), call("fast__echo", 2)]);
      const elapsed = performance.now() - t0;
      expect(fast.status).toBe(200);
      for (const r of [s, d]) {
        expect(r.status).toBe(504);
        expect(((await r.json()) as { error: string }).error).toBe("UPSTREAM_TIMEOUT");
        expect(r.headers.get("x-clearing-outcome")).toBe("refunded_timeout");
      }
      expect(elapsed).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    } finally {
      expect(await again.stop()).toBe(0);
    }
    const check = await runBinary(["desk", "check", "--data", data]);
    expect(check.code).toBe(0);
  });

  test("a flood of calls to a silent upstream: other upstreams answer at once meanwhile, and no socket outlives the timeout", async () => {
    await using tmp = tempDir();
    const silent = await stallingProxy(fx.port);
    proxies.push(silent);
    // A longer timeout here: the window in which the flood is stuck must dwarf a fast call.
    const FLOOD_TIMEOUT_MS = 2_000;
    const desk = await startDeskProcess(join(tmp.path, "d"), ["--upstream-timeout", String(FLOOD_TIMEOUT_MS / 1000)]);
    try {
      await adminJson(desk, "POST", "/admin/upstreams", { name: "fast", url: fx.url });
      await adminJson(desk, "POST", "/admin/upstreams", { name: "silent", url: `http://127.0.0.1:${silent.port}/mcp` });
      const org = (await adminJson(desk, "POST", "/admin/orgs", { name: "pool" })).org_id as string;
      // 20 failed calls an hour per key: 13 keys carry the 260 stuck calls.
      const keys: string[] = [];
      for (let i = 0; i < 14; i++) {
        keys.push(
          (await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 1_000_000, reset: "none", allow: ["silent__echo", "fast__echo"] }))
            .secret as string,
        );
      }
      expect((await callTool(desk.url, keys[0]!, "silent__echo", { text: "warm" })).status).toBe(200);
      await silent.setMode("silent");

      const t0 = performance.now();
      const flood = Promise.all(
        Array.from({ length: 260 }, async (_, i) => {
          const r = await callTool(desk.url, keys[i % 13]!, "silent__echo", { text: `stuck ${i}` });
          await r.arrayBuffer();
          return r.status;
        }),
      );
      // While the flood waits on the silent upstream (as many exchanges as it may hold), a call to
      // the healthy one, on a socket of its own (this process's fetch pool is busy with the flood).
      await silent.whenSilentAtLeast(MAX_EXCHANGES_PER_UPSTREAM);
      const during = await rawCall(desk.url, keys[13]!, "fast__echo", { text: "during the flood" });
      expect(during.status).toBe(200);
      expect(during.ms).toBeLessThan(FLOOD_TIMEOUT_MS / 3);
      expect(performance.now() - t0).toBeLessThan(FLOOD_TIMEOUT_MS);
      // The silent upstream never held more than its share of the runtime's 256 connections.
      expect(silent.stats.peakSilentOpen).toBe(MAX_EXCHANGES_PER_UPSTREAM);

      const stuck = await flood;
      expect(stuck.every((status) => status === 504)).toBe(true);
      // Each exchange is cut at the timeout: the sockets close (before the fix they stayed open
      // for good and, past 256, every other upstream's calls timed out as well).
      await silent.whenSilentClosed(FLOOD_TIMEOUT_MS + SLACK_MS);
      const after = await callTool(desk.url, keys[13]!, "fast__echo", { text: "still served" });
      expect(after.status).toBe(200);
    } finally {
      expect(await desk.stop()).toBe(0);
    }
  });
});
