// `npm start`: the main job on a fresh clone. npm start has built dist/ask-only already; this
// makes certificates in ./certs when there are none (saying so), prints the exact line that
// connects Claude Code to serve-mcp, and runs the approver in this terminal.
// Extra arguments go to the approver: `npm start -- --ttl 5m`.
import { existsSync } from "node:fs";
import { resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
const binary = resolve(root, "dist/ask-only");
const certs = resolve(root, "certs");
const file = (name: string) => resolve(certs, name);

if (!existsSync(binary)) {
  console.error(`start: ${binary} is missing; run \`npm start\` (it builds first) or \`npm run build\``);
  process.exit(1);
}

const needed = ["approver.pem", "approver.key", "client-ca.pem", "client.pem", "client.key", "approver-ca.pem"];
const present = needed.filter((name) => existsSync(file(name)));
if (present.length === 0) {
  console.error(`start: no certificates in ${certs}; making them now`);
  const made = Bun.spawnSync([binary, "certs", certs], { stdout: "inherit", stderr: "inherit" });
  if (made.exitCode !== 0) process.exit(made.exitCode ?? 1);
} else if (present.length < needed.length) {
  const missing = needed.filter((name) => !present.includes(name));
  console.error(`start: ${certs} lacks ${missing.join(", ")}; move the directory away and run npm start again`);
  process.exit(1);
} else {
  console.error(`start: using the certificates in ${certs}`);
}

const passThrough = process.argv.slice(2);
const listenAt = passThrough.indexOf("--listen");
const listen = (listenAt >= 0 ? passThrough[listenAt + 1] : undefined) ?? process.env.ASK_ONLY_PAY_APPROVER_LISTEN ?? "127.0.0.1:8443";
const port = /:(\d+)$/.exec(listen)?.[1] ?? "8443";
const host = listen.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
// The approver's certificate names localhost, 127.0.0.1 and ::1 (and any --host given to certs).
const urlHost = host === "0.0.0.0" || host === "::" || host === "127.0.0.1" ? "localhost" : host.includes(":") ? `[${host}]` : host;

const quote = (s: string) => (/^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);
const mcpAdd = [
  "claude mcp add --transport stdio ask-only",
  `-e ${quote(`ASK_ONLY_PAY_URL=https://${urlHost}:${port}`)}`,
  `-e ${quote(`ASK_ONLY_PAY_CLIENT_CERT=${file("client.pem")}`)}`,
  `-e ${quote(`ASK_ONLY_PAY_CLIENT_KEY=${file("client.key")}`)}`,
  `-e ${quote(`ASK_ONLY_PAY_CA=${file("approver-ca.pem")}`)}`,
  `-- ${quote(binary)} serve-mcp`,
].join(" ");

console.error("");
console.error("start: to let Claude Code ask through this approver, run in another terminal:");
console.error("");
console.log(mcpAdd);
console.error("");
console.error("start: then ask the agent to pay, e.g. 19.00 EUR to Example Shop with card-2; the recap");
console.error('start: shows here; type "approve ID" or "deny ID". Stop with Ctrl-C.');
console.error("");

const approver = Bun.spawn([binary, "approver", "--cert", file("approver.pem"), "--key", file("approver.key"), "--ca", file("client-ca.pem"), ...passThrough], {
  stdin: "inherit",
  stdout: "inherit",
  stderr: "inherit",
});
// Ctrl-C reaches the approver too (same terminal); this script only waits for it to stop.
process.on("SIGINT", () => {});
process.on("SIGTERM", () => approver.kill("SIGTERM"));
process.exit(await approver.exited);
