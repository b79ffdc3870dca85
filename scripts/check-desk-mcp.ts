// `npm run check:desk-mcp`: the desk's /mcp against MCP clients that are not ours.
//  1. The MCP Inspector CLI: tools/list (--strict) and a paid tools/call with the bearer header.
//  2. The MCP conformance suite (@modelcontextprotocol/conformance) for the scenarios that apply.
//     Its client cannot send headers, so it talks to a small relay that adds the bearer header
//     and maps the relay's own port in Host/Origin to the desk's; every other Host or Origin
//     (the suite's evil.example.com) goes through unchanged, so the desk's own check answers.
// Exit 0 when the Inspector steps and every conformance check pass.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startUpstreamFixture } from "../test/fixtures/upstream-server.ts";
import { CONFORMANCE, INSPECTOR, requireExtraChecks } from "./lib/extra-checks.ts";

const root = resolve(import.meta.dir, "..");
const binary = resolve(root, "dist/ask-only");
const bun = resolve(root, "node_modules/.bin/bun");
requireExtraChecks(INSPECTOR, CONFORMANCE);
const TOKEN = "check-desk-mcp-admin-token-0123456789abcdefghij";
const SCENARIOS = ["server-initialize", "ping", "tools-list", "tools-call-simple-text", "dns-rebinding-protection"];

type Run = { code: number; stdout: string; stderr: string; ms: number };

async function run(cmd: string[]): Promise<Run> {
  const started = performance.now();
  const proc = Bun.spawn(cmd, { env: { ...process.env, NO_COLOR: "1" }, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr, ms: Math.round(performance.now() - started) };
}

let failures = 0;
function report(ok: boolean, what: string, r?: Run): void {
  if (!ok) failures++;
  console.log(`${ok ? "ok" : "FAILED"}: ${what}${r ? ` (${r.ms} ms)` : ""}`);
  if (!ok && r) console.log(`exit ${r.code}\n--- stdout\n${r.stdout.slice(0, 4000)}\n--- stderr\n${r.stderr.slice(0, 4000)}`);
}

const work = mkdtempSync(join(tmpdir(), "ask-only-desk-mcp-"));
const fx = startUpstreamFixture();
const desk = Bun.spawn([binary, "desk", "--listen", "127.0.0.1:0", "--data", join(work, "data")], {
  env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN, NO_COLOR: "1" },
  stdout: "ignore",
  stderr: "pipe",
});
let relay: ReturnType<typeof Bun.serve> | undefined;
try {
  const reader = (desk.stderr as ReadableStream<Uint8Array>).getReader();
  let said = "";
  let port: number | undefined;
  while (port === undefined) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the desk did not start:\n${said}`);
    said += new TextDecoder().decode(value);
    const m = /desk listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(said);
    if (m) port = Number(m[1]);
  }
  void (async () => {
    while (!(await reader.read()).done) {}
  })();
  const deskUrl = `http://127.0.0.1:${port}`;
  const admin = (method: string, path: string, body?: unknown) =>
    fetch(`${deskUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  if ((await admin("POST", "/admin/upstreams", { name: "fx", url: fx.url })).status !== 201) throw new Error("registering the fixture upstream failed");
  await admin("PUT", "/admin/tools/fx__echo", { price_mc: 1500, upstream_cost_mc: 500 });
  const org = (await (await admin("POST", "/admin/orgs", { name: "check" })).json()) as { org_id: string };
  const made = await admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 1_000_000, reset: "none", allow: ["fx__echo", "fx__add"] });
  const secret = ((await made.json()) as { secret: string }).secret;
  const header = ["--header", `Authorization: Bearer ${secret}`];

  // --- 1. MCP Inspector CLI ---
  const cli = ["node", INSPECTOR, "--cli", `${deskUrl}/mcp`, "--transport", "http", ...header];
  const listed = await run([...cli, "--strict", "--method", "tools/list"]);
  let names: string[] = [];
  try {
    names = (JSON.parse(listed.stdout) as { tools: { name: string }[] }).tools.map((t) => t.name).sort();
  } catch {}
  report(listed.code === 0 && names.join(",") === "fx__add,fx__echo", `inspector tools/list --strict: ${names.join(", ")}`, listed);
  const called = await run([...cli, "--method", "tools/call", "--tool-name", "fx__echo", "--tool-arg", "text=hello from the inspector"]);
  let receipt: { receipt?: { outcome?: string; amount_mc?: number } } | undefined;
  try {
    receipt = (JSON.parse(called.stdout) as { _meta?: Record<string, typeof receipt> })._meta?.["io.ask-only/receipt"];
  } catch {}
  report(
    called.code === 0 && receipt?.receipt?.outcome === "charged",
    `inspector tools/call fx__echo: ${receipt?.receipt?.outcome ?? "no receipt"} ${receipt?.receipt?.amount_mc ?? ""} mc`,
    called,
  );
  const refused = await run(["node", INSPECTOR, "--cli", `${deskUrl}/mcp`, "--transport", "http", "--method", "tools/list"]);
  report(refused.code !== 0, "inspector without the bearer header is refused", refused);

  // --- 2. Conformance suite through the header relay ---
  relay = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const own = relay!.port;
      const map = (v: string | null) =>
        v === null ? null : v.replace(new RegExp(`^((?:https?://)?(?:localhost|127\\.0\\.0\\.1|\\[::1\\])):${own}$`), `$1:${port}`);
      const headers = new Headers(req.headers);
      headers.set("authorization", `Bearer ${secret}`);
      headers.set("host", map(req.headers.get("host")) ?? `127.0.0.1:${port}`);
      const origin = map(req.headers.get("origin"));
      if (origin !== null) headers.set("origin", origin);
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : await req.arrayBuffer();
      const answer = await fetch(`${deskUrl}${new URL(req.url).pathname}`, { method: req.method, headers, body });
      return new Response(answer.body, { status: answer.status, headers: answer.headers });
    },
  });
  const target = `http://localhost:${relay.port}/mcp`;
  for (const scenario of SCENARIOS) {
    const r = await run([bun, CONFORMANCE, "server", "--url", target, "--scenario", scenario, "--verbose"]);
    let checks: { id: string; status: string; errorMessage?: string; details?: unknown }[] = [];
    try {
      checks = JSON.parse(r.stdout.slice(r.stdout.indexOf("["), r.stdout.lastIndexOf("]") + 1));
    } catch {}
    const failed = checks.filter((c) => c.status !== "SUCCESS" && c.status !== "INFO");
    report(
      r.code === 0 && checks.length > 0 && failed.length === 0,
      `conformance ${scenario}: ${checks.map((c) => `${c.id}=${c.status}`).join(", ") || "no checks"}`,
      r,
    );
    if (scenario === "tools-call-simple-text") {
      // The suite calls a tool named test_simple_text; desk tools are named upstream__tool, so
      // what it received is the desk's TOOL_UNKNOWN refusal (a text result the check accepts).
      const detail = JSON.stringify((checks[0]?.details as { result?: unknown } | undefined)?.result ?? null);
      console.log(`  note: the desk answered ${detail}`);
    }
  }
} finally {
  relay?.stop(true);
  desk.kill("SIGTERM");
  await desk.exited;
  await fx.stop();
  rmSync(work, { recursive: true, force: true });
}
console.log(failures === 0 ? "check-desk-mcp: all passed" : `check-desk-mcp: ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
