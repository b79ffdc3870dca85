// `ask-only certs` as a real process, checked independently with openssl.
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { giveToOtherUser, OTHER_UID } from "../helpers/other-user.ts";
import { tempDir } from "../helpers/tmp.ts";

const FILES = ["approver-ca.pem", "approver.key", "approver.pem", "client-ca.pem", "client.key", "client.pem"];

function openssl(args: string[], cwd: string) {
  const p = Bun.spawnSync(["openssl", ...args], { cwd, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
}

describe("ask-only certs", () => {
  test("writes the six files, keys 0600 and the directory 0700, and says what goes where", async () => {
    await using tmp = tempDir();
    const dir = join(tmp.path, "fresh", "certs");
    const r = await runBinary(["certs", dir, "--host", "approver.internal", "--host", "10.1.2.3"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`certificates written to ${dir}`);
    expect(r.stdout).toContain("copy to the approver:  approver.pem approver.key client-ca.pem");
    expect(r.stdout).toContain("copy to serve-mcp:     client.pem client.key approver-ca.pem");
    expect(readdirSync(dir).sort()).toEqual(FILES);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, "approver.key")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "client.key")).mode & 0o777).toBe(0o600);
    // The CA keys are discarded: exactly two private keys on disk, one in each .key file, and
    // each is its own leaf's key (a CA key kept anywhere would let its holder mint certificates).
    const privateKeys = FILES.map((f) => readFileSync(join(dir, f), "utf8").split("BEGIN PRIVATE KEY").length - 1);
    expect(privateKeys).toEqual(FILES.map((f) => (f.endsWith(".key") ? 1 : 0)));
    for (const leaf of ["approver", "client"]) {
      const certKey = openssl(["x509", "-in", `${leaf}.pem`, "-noout", "-pubkey"], dir);
      const ownKey = openssl(["pkey", "-in", `${leaf}.key`, "-pubout"], dir);
      expect(certKey.code).toBe(0);
      expect(ownKey.out).toBe(certKey.out);
    }

    // Chain and EKU, for each leaf against its own CA only.
    expect(openssl(["verify", "-CAfile", "approver-ca.pem", "-purpose", "sslserver", "approver.pem"], dir).code).toBe(0);
    expect(openssl(["verify", "-CAfile", "client-ca.pem", "-purpose", "sslclient", "client.pem"], dir).code).toBe(0);
    // Two separate CAs: neither leaf verifies under the other CA.
    expect(openssl(["verify", "-CAfile", "client-ca.pem", "approver.pem"], dir).code).not.toBe(0);
    expect(openssl(["verify", "-CAfile", "approver-ca.pem", "client.pem"], dir).code).not.toBe(0);
    // EKU: the client certificate is no server certificate, and the reverse.
    expect(openssl(["verify", "-CAfile", "client-ca.pem", "-purpose", "sslserver", "client.pem"], dir).code).not.toBe(0);
    expect(openssl(["verify", "-CAfile", "approver-ca.pem", "-purpose", "sslclient", "approver.pem"], dir).code).not.toBe(0);
    // SANs: the defaults and every --host.
    for (const [flag, name] of [
      ["-verify_hostname", "localhost"],
      ["-verify_hostname", "approver.internal"],
      ["-verify_ip", "127.0.0.1"],
      ["-verify_ip", "::1"],
      ["-verify_ip", "10.1.2.3"],
    ]) {
      expect(openssl(["verify", "-CAfile", "approver-ca.pem", flag!, name!, "approver.pem"], dir).code).toBe(0);
    }
    expect(openssl(["verify", "-CAfile", "approver-ca.pem", "-verify_hostname", "evil.example", "approver.pem"], dir).code).not.toBe(0);
    // P-256 keys.
    expect(openssl(["pkey", "-in", "client.key", "-noout", "-text"], dir).out).toContain("prime256v1");
  });

  test("refuses to overwrite any existing file, names it, and writes nothing", async () => {
    await using tmp = tempDir();
    writeFileSync(join(tmp.path, "client.key"), "precious");
    const r = await runBinary(["certs", tmp.path]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      `ask-only: error: ${join(tmp.path, "client.key")} already exists; refusing to overwrite it\n` +
        "ask-only: hint: choose another directory or move the old files away\n",
    );
    expect(readdirSync(tmp.path)).toEqual(["client.key"]);
    expect(await Bun.file(join(tmp.path, "client.key")).text()).toBe("precious");
  });

  test("a link where a key goes counts as an existing file, even one that points nowhere", async () => {
    await using tmp = tempDir();
    const dir = join(tmp.path, "certs");
    const target = join(tmp.path, "elsewhere.key");
    mkdirSync(dir, { mode: 0o700 });
    symlinkSync(target, join(dir, "client.key"));
    const r = await runBinary(["certs", dir]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      `ask-only: error: ${join(dir, "client.key")} already exists; refusing to overwrite it\n` +
        "ask-only: hint: choose another directory or move the old files away\n",
    );
    expect(existsSync(target)).toBe(false);
    expect(readdirSync(dir)).toEqual(["client.key"]);
  });

  test("an output directory others can write is refused before anything is written", async () => {
    // From such a directory another user could swap a key file for a link between our open and
    // our write (core/private-files.ts): it is refused, sticky or not, and left as it was.
    await using tmp = tempDir();
    for (const m of [0o777, 0o1777, 0o770]) {
      const dir = join(tmp.path, `open-${m.toString(8)}`);
      mkdirSync(dir);
      chmodSync(dir, m);
      const mode = m.toString(8).padStart(4, "0");
      expect(await runBinary(["certs", dir])).toEqual({
        code: 1,
        stdout: "",
        stderr: `ask-only: error: ${dir} can be written by group or others (mode ${mode})\nask-only: hint: run: chmod go-w ${dir}\n`,
      });
      expect(readdirSync(dir)).toEqual([]);
      expect(statSync(dir).mode & 0o7777).toBe(m);
    }
  });

  test("an output directory another user owns, or a link, is refused; so is one under a parent others can write", async () => {
    await using tmp = tempDir();
    const theirs = join(tmp.path, "theirs");
    mkdirSync(theirs, { mode: 0o755 });
    giveToOtherUser(theirs);
    expect(await runBinary(["certs", theirs])).toEqual({
      code: 1,
      stdout: "",
      stderr: `ask-only: error: ${theirs} is owned by uid ${OTHER_UID}, not by this user (uid ${process.geteuid!()})\nask-only: hint: use a directory of your own, or run as its owner\n`,
    });
    expect(readdirSync(theirs)).toEqual([]);

    const real = join(tmp.path, "real");
    mkdirSync(real, { mode: 0o700 });
    const link = join(tmp.path, "link");
    symlinkSync(real, link);
    expect(await runBinary(["certs", link])).toEqual({
      code: 1,
      stdout: "",
      stderr: `ask-only: error: ${link} is a symbolic link; refusing to follow it\nask-only: hint: give the real directory's path\n`,
    });
    expect(readdirSync(real)).toEqual([]);

    const shared = join(tmp.path, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const r = await runBinary(["certs", join(shared, "certs")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toStartWith(`ask-only: error: ${shared} can be written by group or others (mode 0777), who could replace ${join(shared, "certs")}\n`);
    expect(readdirSync(shared)).toEqual([]);
  });

  test("a second run into the same directory is refused", async () => {
    await using tmp = tempDir();
    expect((await runBinary(["certs", tmp.path])).code).toBe(0);
    const before = await Bun.file(join(tmp.path, "approver.key")).text();
    const r = await runBinary(["certs", tmp.path]);
    expect(r.code).toBe(1);
    expect(r.stderr).toStartWith("ask-only: error: ");
    expect(await Bun.file(join(tmp.path, "approver.key")).text()).toBe(before);
  });

  test("a bad --host is a usage error", async () => {
    await using tmp = tempDir();
    const r = await runBinary(["certs", join(tmp.path, "x"), "--host", "not a host"]);
    expect(r).toEqual({ code: 2, stdout: "", stderr: 'ask-only: error: --host "not a host" is not a DNS name or an IP address\n' });
  });
});
