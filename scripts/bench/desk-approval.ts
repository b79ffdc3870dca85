// What a call that waits for a person costs the desk, apart from the person: the compiled desk
// linked over mutual TLS to a compiled approver on a pseudo-terminal (certificates from `ask-only
// certs`), the fixture upstream in its own process. Sequential calls, reused connections, p50 and
// p99 of each, and each p50 as a ratio to a plain charged call measured in the same run:
//   charged      a call at or below the threshold (the baseline: reserve, upstream, settle)
//   202          a call above it: reserve, the spend ask over mTLS, the ask recorded
//   pending      its repeat while nobody decided: the decision read over mTLS (409)
//   approved     its repeat once approved (typed on the terminal): the decision read and
//                verified, the claim, the upstream, the settlement with a receipt v2
// Usage: bun build.ts && bun scripts/bench/desk-approval.ts [--asks N] [--baseline N]
//        (asks default 40, at most 50; plain calls of the baseline default 300)
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { firstLine, quantile } from "./lib/measure.ts";

const root = resolve(import.meta.dir, "../..");
const BINARY = join(root, "dist/ask-only");
const ASKS = Math.min(50, Number(process.argv[process.argv.indexOf("--asks") + 1]) || 40);
const BASELINE_CALLS = Number(process.argv[process.argv.indexOf("--baseline") + 1]) || 300;
const TOKEN = "bench-admin-token-0123456789abcdefghijklmnopqrstuvwxyz";
const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", NO_COLOR: "1", TZ: "Etc/UTC", TERM: "xterm-256color" };

const tmp = mkdtempSync(join(tmpdir(), "desk-approval-bench-"));
const run = (args: string[]) => {
  const r = Bun.spawnSync([BINARY, ...args], { env, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString();
};
run(["certs", join(tmp, "link")]);
run(["certs", join(tmp, "desk-certs"), "--desk"]);
const db = join(tmp, "asks.db");

// The approver on a terminal; `waitFor` wakes on what it prints.
let screen = "";
const wakers = new Set<() => void>();
const approver = Bun.spawn(
  [
    BINARY,
    "approver",
    ...["--cert", join(tmp, "link/approver.pem"), "--key", join(tmp, "link/approver.key"), "--ca", join(tmp, "link/client-ca.pem")],
    ...["--listen", "127.0.0.1:0", "--desk-listen", "127.0.0.1:0", "--desk-ca", join(tmp, "desk-certs/desk-ca.pem"), "--db", db],
  ],
  {
    env,
    terminal: {
      cols: 120,
      rows: 50,
      data: (_t, bytes) => {
        screen += new TextDecoder().decode(bytes);
        for (const w of wakers) w();
      },
    },
  },
);
const waitFor = (re: RegExp, from = 0) =>
  new Promise<RegExpExecArray>((done) => {
    const check = () => {
      const m = re.exec(screen.slice(from));
      if (m) {
        wakers.delete(check);
        done(m);
      }
    };
    wakers.add(check);
    check();
  });
const deskPort = (await waitFor(/listening for the desk on https:\/\/127\.0\.0\.1:(\d+)/))[1]!;
await waitFor(/type "help" for the console commands/);
writeFileSync(join(tmp, "approver-keys.json"), run(["approver", "--print-decision-keys", "--db", db]));

const upstream = Bun.spawn([process.execPath, join(root, "test/fixtures/upstream-server.ts")], { stdout: "pipe", stderr: "inherit" });
const upstreamUrl = await firstLine(upstream.stdout as ReadableStream<Uint8Array>, /(http:\/\/\S+)\n/);
const desk = Bun.spawn(
  [
    BINARY,
    "desk",
    ...["--listen", "127.0.0.1:0", "--data", join(tmp, "data"), "--approver", `https://localhost:${deskPort}`],
    ...["--approver-cert", join(tmp, "desk-certs/desk.pem"), "--approver-key", join(tmp, "desk-certs/desk.key")],
    ...["--approver-ca", join(tmp, "link/approver-ca.pem"), "--approver-keys", join(tmp, "approver-keys.json")],
  ],
  { env: { ...env, ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN }, stdout: "ignore", stderr: "pipe" },
);
const deskUrl = await firstLine(desk.stderr as ReadableStream<Uint8Array>, /desk listening on (http:\/\/\S+)\n/);

const admin = async (method: string, path: string, body: unknown) => {
  const r = await fetch(`${deskUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (r.status >= 300) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as Record<string, string>;
};
await admin("POST", "/admin/upstreams", { name: "fx", url: upstreamUrl });
await admin("PUT", "/admin/tools/fx__echo", { price_mc: 5000, upstream_cost_mc: 0 });
const org = await admin("POST", "/admin/orgs", { name: "bench" });
const key = (approveAbove: number) =>
  admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 1e12, reset: "none", allow: ["fx__echo"], approve_above_mc: approveAbove });
const plain = (await key(5000)).secret!;
// A call waiting for a person counts as running against its key's limit of 20: one key per ask.
const waiting: string[] = [];
for (let i = 0; i < ASKS; i++) waiting.push((await key(0)).secret!);

const call = (secret: string, args: unknown, approvalId?: string) =>
  fetch(`${deskUrl}/v1/tools/fx__echo`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": "application/json", ...(approvalId ? { "x-clearing-approval": approvalId } : {}) },
    body: JSON.stringify(args),
  });

async function timed(label: string, n: number, one: (i: number) => Promise<Response>, status: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await one(i);
    await r.arrayBuffer();
    times.push(performance.now() - t0);
    if (r.status !== status) throw new Error(`${label}: ${r.status}, expected ${status}`);
  }
  return times.sort((a, b) => a - b);
}

const p = (xs: number[], q: number) => quantile(xs, q / 100);

try {
  // Warm both paths before measuring.
  await timed("warm", 50, (i) => call(plain, { text: `warm ${i}` }), 200);
  const charged = await timed("charged", BASELINE_CALLS, (i) => call(plain, { text: `plain ${i}` }), 200);
  const ids: string[] = [];
  const asked = await timed(
    "202",
    ASKS,
    async (i) => {
      const r = await call(waiting[i]!, { text: `ask ${i}` });
      ids.push(r.headers.get("x-clearing-approval-id") ?? "");
      return r;
    },
    202,
  );
  const pending = await timed("pending", ASKS, (i) => call(waiting[i]!, { text: `ask ${i}` }, ids[i]), 202);
  for (const id of ids) {
    const from = screen.length;
    approver.terminal!.write(`approve ${id}\r`);
    await waitFor(new RegExp(`${id}: approved`), from);
  }
  const approved = await timed("approved", ASKS, (i) => call(waiting[i]!, { text: `ask ${i}` }, ids[i]), 200);
  const base = p(charged, 50);
  console.log(`desk approval bench: ${ASKS} asks, ${BASELINE_CALLS} baseline calls, sequential`);
  for (const [label, t] of [
    ["charged (baseline)", charged],
    ["202 (spend ask sent)", asked],
    ["pending repeat", pending],
    ["approved repeat", approved],
  ] as const) {
    console.log(`  ${label.padEnd(22)} p50 ${p(t, 50).toFixed(2)} ms  p99 ${p(t, 99).toFixed(2)} ms  p50 ratio ${(p(t, 50) / base).toFixed(2)}`);
  }
} finally {
  desk.kill();
  upstream.kill();
  approver.kill();
  await Promise.all([desk.exited, upstream.exited, approver.exited]);
  rmSync(tmp, { recursive: true, force: true });
}
