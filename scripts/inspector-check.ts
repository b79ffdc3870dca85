// `npm run check:inspector`: an MCP client that is not ours, the MCP Inspector CLI, lists the
// tools of `dist/ask-only serve-mcp` (with --strict, which reports schema portability problems)
// and calls `request` against a real approver started here. Exit 0 when both work.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { PAY_FIELDS } from "../test/helpers/sample-asks.ts";
import { INSPECTOR, requireExtraChecks } from "./lib/extra-checks.ts";

const root = resolve(import.meta.dir, "..");
const binary = resolve(root, "dist/ask-only");
requireExtraChecks(INSPECTOR);
const work = mkdtempSync(join(tmpdir(), "ask-only-inspector-"));
const certs = join(work, "certs");

type Run = { code: number; stdout: string; stderr: string; ms: number };

async function run(cmd: string[], env: Record<string, string> = {}): Promise<Run> {
  const started = performance.now();
  const proc = Bun.spawn(cmd, { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr, ms: Math.round(performance.now() - started) };
}

function fail(what: string, r?: Run): never {
  console.error(`inspector-check: FAILED: ${what}`);
  if (r) console.error(`exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`);
  throw new Error(what);
}

let approver: ReturnType<typeof Bun.spawn> | undefined;
try {
  const made = await run([binary, "certs", certs]);
  if (made.code !== 0) fail("ask-only certs", made);

  approver = Bun.spawn(
    [
      binary,
      "approver",
      "--cert",
      join(certs, "approver.pem"),
      "--key",
      join(certs, "approver.key"),
      "--ca",
      join(certs, "client-ca.pem"),
      "--listen",
      "127.0.0.1:0",
      "--db",
      join(work, "asks.db"),
    ],
    { stdin: "pipe", stdout: "pipe", stderr: "pipe" },
  );
  // The port, from the start-up line (read as it arrives).
  const reader = (approver.stderr as ReadableStream<Uint8Array>).getReader();
  let said = "";
  let port: string | undefined;
  while (port === undefined) {
    const { done, value } = await reader.read();
    if (done) fail(`the approver did not start:\n${said}`);
    said += new TextDecoder().decode(value);
    port = /listening on https:\/\/127\.0\.0\.1:(\d+)/.exec(said)?.[1];
  }
  reader.releaseLock();

  const env = [
    `ASK_ONLY_PAY_URL=https://localhost:${port}`,
    `ASK_ONLY_PAY_CLIENT_CERT=${join(certs, "client.pem")}`,
    `ASK_ONLY_PAY_CLIENT_KEY=${join(certs, "client.key")}`,
    `ASK_ONLY_PAY_CA=${join(certs, "approver-ca.pem")}`,
  ].flatMap((kv) => ["-e", kv]);
  const cli = ["node", INSPECTOR, "--cli", ...env];

  const listed = await run([...cli, "--strict", binary, "serve-mcp", "--method", "tools/list"]);
  if (listed.code !== 0) fail("tools/list (--strict)", listed);
  const tools = (JSON.parse(listed.stdout) as { tools: { name: string }[] }).tools;
  if (tools.length !== 1 || tools[0]!.name !== "request") fail("tools/list did not show exactly the tool `request`", listed);
  console.log(`inspector-check: tools/list --strict ok (${listed.ms} ms): ${tools.map((t) => t.name).join(", ")}; stderr: ${listed.stderr.trim() || "(none)"}`);

  // Values go as JSON: the Inspector reads `amount=19.00` as the number 19.
  const args = { verb: "pay", ...PAY_FIELDS };
  const called = await run([
    ...cli,
    binary,
    "serve-mcp",
    "--method",
    "tools/call",
    "--tool-name",
    "request",
    "--tool-arg",
    ...Object.entries(args).map(([k, v]) => `${k}=${JSON.stringify(v)}`),
  ]);
  if (called.code !== 0) fail("tools/call request", called);
  const result = JSON.parse(called.stdout) as { structuredContent?: { state?: string; approval_id?: string }; isError?: boolean };
  if (result.isError || result.structuredContent?.state !== "pending") fail("tools/call did not answer pending", called);
  console.log(`inspector-check: tools/call ok (${called.ms} ms): ${JSON.stringify(result.structuredContent)}`);
} finally {
  approver?.kill("SIGTERM");
  await approver?.exited;
  rmSync(work, { recursive: true, force: true });
}
