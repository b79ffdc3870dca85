// `npm run check:openssl`: the files of `dist/ask-only certs` checked with the openssl command
// line (chain and purpose, the SANs, the keys), beside the Node/OpenSSL checks that `npm test`
// runs (test/e2e/certs.test.ts). Needs `openssl` on the PATH; .ci/run installs it. Exit 0 when
// every check passes.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const binary = resolve(import.meta.dir, "../dist/ask-only");
const work = mkdtempSync(join(tmpdir(), "ask-only-openssl-"));
const dir = join(work, "certs");
let failures = 0;

function openssl(args: string[]): { code: number; out: string } {
  const p = Bun.spawnSync(["openssl", ...args], { cwd: dir, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
}

function check(ok: boolean, what: string, detail = ""): void {
  if (!ok) failures++;
  console.log(`${ok ? "ok" : "FAILED"}: ${what}${!ok && detail ? `\n${detail}` : ""}`);
}

/** `openssl verify` with `args` passes (`pass`) or is refused. */
function verify(pass: boolean, what: string, args: string[]): void {
  const r = openssl(["verify", ...args]);
  check((r.code === 0) === pass, what, r.out);
}

try {
  const version = Bun.spawnSync(["openssl", "version"], { stdout: "pipe", stderr: "pipe" });
  if (version.exitCode !== 0) throw new Error("openssl is not on the PATH");
  console.log(`check-openssl: ${version.stdout.toString().trim()}`);
  const made = Bun.spawnSync([binary, "certs", dir, "--host", "approver.internal", "--host", "10.1.2.3"], { stdout: "pipe", stderr: "pipe" });
  if (made.exitCode !== 0) throw new Error(`ask-only certs failed: ${made.stderr.toString()}`);

  for (const leaf of ["approver", "client"]) {
    const certKey = openssl(["x509", "-in", `${leaf}.pem`, "-noout", "-pubkey"]);
    const ownKey = openssl(["pkey", "-in", `${leaf}.key`, "-pubout"]);
    check(certKey.code === 0 && ownKey.out === certKey.out, `${leaf}.key is the key of ${leaf}.pem`, `${certKey.out}\n${ownKey.out}`);
  }
  verify(true, "approver.pem chains to approver-ca.pem for a TLS server", ["-CAfile", "approver-ca.pem", "-purpose", "sslserver", "approver.pem"]);
  verify(true, "client.pem chains to client-ca.pem for a TLS client", ["-CAfile", "client-ca.pem", "-purpose", "sslclient", "client.pem"]);
  verify(false, "approver.pem does not chain to client-ca.pem", ["-CAfile", "client-ca.pem", "approver.pem"]);
  verify(false, "client.pem does not chain to approver-ca.pem", ["-CAfile", "approver-ca.pem", "client.pem"]);
  verify(false, "client.pem is no TLS server certificate", ["-CAfile", "client-ca.pem", "-purpose", "sslserver", "client.pem"]);
  verify(false, "approver.pem is no TLS client certificate", ["-CAfile", "approver-ca.pem", "-purpose", "sslclient", "approver.pem"]);
  for (const [flag, name] of [
    ["-verify_hostname", "localhost"],
    ["-verify_hostname", "approver.internal"],
    ["-verify_ip", "127.0.0.1"],
    ["-verify_ip", "::1"],
    ["-verify_ip", "10.1.2.3"],
  ] as const) {
    verify(true, `approver.pem names ${name}`, ["-CAfile", "approver-ca.pem", flag, name, "approver.pem"]);
  }
  verify(false, "approver.pem does not name evil.example", ["-CAfile", "approver-ca.pem", "-verify_hostname", "evil.example", "approver.pem"]);
  check(openssl(["pkey", "-in", "client.key", "-noout", "-text"]).out.includes("prime256v1"), "client.key is a P-256 key");
} catch (err) {
  failures++;
  console.log(`FAILED: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(failures === 0 ? "check-openssl: all passed" : `check-openssl: ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
