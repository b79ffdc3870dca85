// `ask-only certs` as a real process, its files read independently by Node's own OpenSSL (a
// `node` child process: test/node/x509-facts.mjs). `npm run check:openssl` checks the same files
// with the openssl command line.
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { giveToOtherUser, OTHER_UID } from "../helpers/other-user.ts";
import { runNode } from "../helpers/node-peer.ts";
import { tempDir } from "../helpers/tmp.ts";

const FILES = ["approver-ca.pem", "approver.key", "approver.pem", "client-ca.pem", "client.key", "client.pem"];
const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const DAY_MS = 86_400_000;

type CertFacts = {
  subject: string;
  issuer: string;
  ca: boolean;
  extendedKeyUsage: string[];
  keyUsage: { critical: boolean; set: string[] } | null;
  basicConstraints: { ca: boolean; pathLen: number | null } | null;
  subjectAltName: string | null;
  curve: string;
  validFrom: string;
  validTo: string;
  signedBy: Record<string, boolean>;
};
type Facts = {
  runtime: { node: string; openssl: string; bun: string | null };
  certificates: Record<string, CertFacts>;
  keyMatches: Record<string, boolean>;
  names: Record<string, string | null>;
};

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
    // The CA keys are discarded: exactly two private keys on disk, one in each .key file.
    const privateKeys = FILES.map((f) => readFileSync(join(dir, f), "utf8").split("BEGIN PRIVATE KEY").length - 1);
    expect(privateKeys).toEqual(FILES.map((f) => (f.endsWith(".key") ? 1 : 0)));
  });

  test("Node's OpenSSL reads two separate CAs, each leaf signed by its own, with the SANs, EKUs, key usages and validity of SPEC section 2", async () => {
    await using tmp = tempDir();
    const before = Date.now();
    expect((await runBinary(["certs", tmp.path, "--host", "approver.internal", "--host", "10.1.2.3"])).code).toBe(0);
    const names = ["localhost", "approver.internal", "127.0.0.1", "::1", "10.1.2.3", "evil.example", "10.1.2.4", "shop.localhost"];
    const f = await runNode<Facts>("x509-facts.mjs", [tmp.path, ...names]);
    // The reader is Node and its OpenSSL, not Bun.
    expect(f.runtime.bun).toBeNull();
    expect(f.runtime.openssl).toMatch(/^\d+\.\d+/);
    const c = f.certificates;

    for (const ca of ["approver-ca.pem", "client-ca.pem"]) {
      expect(c[ca]!.ca).toBe(true);
      expect(c[ca]!.basicConstraints).toEqual({ ca: true, pathLen: 0 });
      expect(c[ca]!.keyUsage).toEqual({ critical: true, set: ["keyCertSign", "cRLSign"] });
      expect(c[ca]!.subject).toBe(c[ca]!.issuer);
    }
    expect(c["approver-ca.pem"]!.subject).not.toBe(c["client-ca.pem"]!.subject);
    // Each certificate verifies under its own CA only: the two CAs are separate.
    expect(c["approver-ca.pem"]!.signedBy).toEqual({ "approver-ca.pem": true, "client-ca.pem": false });
    expect(c["client-ca.pem"]!.signedBy).toEqual({ "approver-ca.pem": false, "client-ca.pem": true });
    expect(c["approver.pem"]!.signedBy).toEqual({ "approver-ca.pem": true, "client-ca.pem": false });
    expect(c["client.pem"]!.signedBy).toEqual({ "approver-ca.pem": false, "client-ca.pem": true });

    for (const leaf of ["approver.pem", "client.pem"]) {
      expect(c[leaf]!.ca).toBe(false);
      expect(c[leaf]!.keyUsage).toEqual({ critical: true, set: ["digitalSignature"] });
    }
    // EKU: the approver's certificate serves only, the client's is a client only.
    expect(c["approver.pem"]!.extendedKeyUsage).toEqual([SERVER_AUTH]);
    expect(c["client.pem"]!.extendedKeyUsage).toEqual([CLIENT_AUTH]);
    // SANs: the defaults and every --host, by OpenSSL's own name matching.
    expect(f.names).toEqual({
      localhost: "localhost",
      "approver.internal": "approver.internal",
      "127.0.0.1": "127.0.0.1",
      "::1": "::1",
      "10.1.2.3": "10.1.2.3",
      "evil.example": null,
      "10.1.2.4": null,
      "shop.localhost": null,
    });
    expect(c["client.pem"]!.subjectAltName).toBeNull();
    // P-256 keys, each leaf's own key in its .key file.
    for (const file of Object.keys(c)) expect(c[file]!.curve).toBe("prime256v1");
    expect(f.keyMatches).toEqual({ "approver.pem": true, "client.pem": true, "approver.pem with client.key": false });
    // Validity: from 5 minutes before now (seconds precision) to 825 days (leaves) or 3650 days
    // (CAs) after now.
    for (const [file, days] of [
      ["approver-ca.pem", 3650],
      ["client-ca.pem", 3650],
      ["approver.pem", 825],
      ["client.pem", 825],
    ] as const) {
      const from = Date.parse(c[file]!.validFrom);
      expect(from).toBeGreaterThanOrEqual(before - 5 * 60_000 - 1000);
      expect(from).toBeLessThanOrEqual(Date.now() - 5 * 60_000);
      expect(Date.parse(c[file]!.validTo) - (from + 5 * 60_000)).toBe(days * DAY_MS);
    }
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
    expect(r).toEqual({
      code: 2,
      stdout: "",
      stderr: `ask-only: error: --host "not a host" is not a DNS name or an IP address\nask-only: hint: run 'ask-only certs --help' for usage\n`,
    });
  });
});
