// ReDoS benchmark: does one key's hostile arguments stall the desk for everyone? The compiled
// desk (its own process) serves a tool whose input schema holds the classic catastrophic
// pattern `^(a+)+$`; 40 keys send `"a"×34 + "!"` (which never matches) 40 at a time, while a
// prober reads the public JWKS one request after another. Printed: JWKS latency p50 / max with
// no load, under the same number of refusals of a harmless argument ("b", the same-run
// baseline), and under the hostile load, with the ratios; and the calls' own latency. On a
// backtracking engine each hostile call holds the event loop for ~0.5 s.
// Usage: bun build.ts && bun scripts/bench/desk-redos.ts [--rounds N] [--binary PATH]
//   --rounds N      bursts of 40 calls (default 20; each key sends N, and 20 is its failure
//                   limit per hour); on a backtracking build one round takes ~20 s
//   --binary PATH   another build of the desk (to compare two builds)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startSchemaUpstream } from "../../test/fixtures/schema-upstream.ts";

const root = resolve(import.meta.dir, "../..");
const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const ROUNDS = Math.min(20, Number(arg("--rounds")) || 20);
const BINARY = resolve(arg("--binary") ?? join(root, "dist/ask-only"));
const TOKEN = "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz";
const HOSTILE = 40;
const BASELINE_PROBES = 300;
const HOSTILE_ARGS = { s: `${"a".repeat(34)}!` };
const HARMLESS_ARGS = { s: "b" };

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const ms = (x: number) => `${x.toFixed(1)} ms`;

const dir = mkdtempSync(join(tmpdir(), "bench-redos-"));
const upstream = startSchemaUpstream([
  { name: "match", inputSchema: { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } }, required: ["s"] } },
]);
const desk = Bun.spawn([BINARY, "desk", "--listen", "127.0.0.1:0", "--data", join(dir, "d")], {
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, NO_COLOR: "1", TZ: "Etc/UTC", ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN },
  stdout: "ignore",
  stderr: "pipe",
});
try {
  const url = await listeningUrl(desk.stderr as ReadableStream<Uint8Array>);
  const admin = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
    return (await r.json()) as Record<string, unknown>;
  };
  await admin("POST", "/admin/upstreams", { name: "hostile", url: upstream.url });
  const org = (await admin("POST", "/admin/orgs", { name: "bench" })).org_id;
  const keys = async () => {
    const out: string[] = [];
    for (let i = 0; i < HOSTILE; i++) {
      out.push((await admin("POST", "/admin/keys", { org_id: org, budget_mc: 1_000_000, reset: "none", allow: ["hostile__match"] })).secret as string);
    }
    return out;
  };
  const jwks = async () => {
    const t0 = performance.now();
    const r = await fetch(`${url}/.well-known/receipt-signing-key.json`);
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`JWKS answered ${r.status}`);
    return performance.now() - t0;
  };

  for (let i = 0; i < 30; i++) await jwks();
  const idle: number[] = [];
  for (let i = 0; i < BASELINE_PROBES; i++) idle.push(await jwks());

  /** ROUNDS bursts of one call per key with `args`, while the prober reads the JWKS. */
  const load = async (secrets: string[], args: unknown) => {
    const probes: number[] = [];
    const callMs: number[] = [];
    const statuses = new Map<number, number>();
    let over = false;
    const t0 = performance.now();
    const calls = (async () => {
      for (let round = 0; round < ROUNDS; round++) {
        await Promise.all(
          secrets.map(async (secret) => {
            const started = performance.now();
            const r = await fetch(`${url}/v1/tools/hostile__match`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: JSON.stringify(args),
            });
            await r.arrayBuffer();
            callMs.push(performance.now() - started);
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          }),
        );
      }
    })().finally(() => {
      over = true;
    });
    // Only probes sent while the calls are still running count (one stuck probe is one figure).
    while (!over) probes.push(await jwks());
    await calls;
    return { probes, callMs, statuses, wall: performance.now() - t0 };
  };
  const harmless = await load(await keys(), HARMLESS_ARGS);
  const hostile = await load(await keys(), HOSTILE_ARGS);

  const line = (label: string, xs: number[]) => `${label} p50 ${ms(pct(xs, 50))}   max ${ms(Math.max(...xs))}   (${xs.length} probes)`;
  const calls = (label: string, r: typeof hostile) =>
    `${label} calls: p50 ${ms(pct(r.callMs, 50))}   max ${ms(Math.max(...r.callMs))}   all answered in ${ms(r.wall)}; statuses ${JSON.stringify(Object.fromEntries(r.statuses))}`;
  console.log(`desk ReDoS benchmark: pattern ^(a+)+$, argument "a"x34+"!", ${HOSTILE} keys x ${ROUNDS} rounds (${BINARY})`);
  console.log(line("JWKS, no load:                   ", idle));
  console.log(line(`JWKS, ${HOSTILE} harmless refusals (base):`, harmless.probes));
  console.log(line(`JWKS, ${HOSTILE} hostile calls:          `, hostile.probes));
  console.log(
    `ratio hostile / harmless: p50 ${(pct(hostile.probes, 50) / pct(harmless.probes, 50)).toFixed(1)}x   max ${(Math.max(...hostile.probes) / Math.max(...harmless.probes)).toFixed(1)}x`,
  );
  console.log(calls("harmless", harmless));
  console.log(calls("hostile ", hostile));
  console.log(`upstream tools/call reached: ${upstream.calls()}`);
} finally {
  desk.kill("SIGTERM");
  await desk.exited;
  await upstream.stop();
  rmSync(dir, { recursive: true, force: true });
}

async function listeningUrl(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the desk exited: ${text}`);
    text += decoder.decode(value, { stream: true });
    const m = /desk listening on (https?:\/\/[^\s]+)/.exec(text);
    if (m) {
      reader.releaseLock();
      stream.pipeTo(new WritableStream()).catch(() => {});
      return m[1]!;
    }
  }
}
