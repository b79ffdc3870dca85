// `ask-only certs DIR --desk` as a real process: the desk's own CA and client certificate, beside
// the link's files or alone, checked with node:crypto (not the openssl command). The CA's private
// key is not kept; nothing is overwritten; the desk CA is none of the link's.
import { describe, expect, test } from "bun:test";
import { X509Certificate, createPrivateKey, createPublicKey } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { tempDir } from "../helpers/tmp.ts";

const LINK = ["approver-ca.pem", "approver.key", "approver.pem", "client-ca.pem", "client.key", "client.pem"];
const DESK = ["desk-ca.pem", "desk.key", "desk.pem"];
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";

describe("ask-only certs --desk", () => {
  test("beside the link's files: three more, the key 0600, the CA key discarded, a clientAuth leaf of its own CA", async () => {
    await using tmp = tempDir();
    const dir = join(tmp.path, "certs");
    expect((await runBinary(["certs", dir])).code).toBe(0);
    const r = await runBinary(["certs", dir, "--desk"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("copy to the approver:  desk-ca.pem (with --desk-listen HOST:PORT --desk-ca desk-ca.pem)");
    expect(r.stdout).toContain("copy to the desk:      desk.pem desk.key and the link's approver-ca.pem (--approver-cert, --approver-key, --approver-ca)");
    expect(r.stdout).toContain("the CA private key was not kept");
    expect(readdirSync(dir).sort()).toEqual([...LINK, ...DESK].sort());
    expect(statSync(join(dir, "desk.key")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "desk.pem")).mode & 0o777).toBe(0o644);
    // One private key in the desk's files, and it is the leaf's own.
    expect(DESK.map((f) => readFileSync(join(dir, f), "utf8").split("BEGIN PRIVATE KEY").length - 1)).toEqual([0, 1, 0]);
    const pem = (f: string) => new X509Certificate(readFileSync(join(dir, f)));
    const [deskCa, desk, clientCa, approverCa, approver] = [
      pem("desk-ca.pem"),
      pem("desk.pem"),
      pem("client-ca.pem"),
      pem("approver-ca.pem"),
      pem("approver.pem"),
    ];
    const leafKey = createPublicKey(createPrivateKey(readFileSync(join(dir, "desk.key"))));
    expect(desk.publicKey.equals(leafKey)).toBe(true);
    expect(deskCa.ca).toBe(true);
    expect(desk.ca).toBe(false);
    expect(desk.checkIssued(deskCa) && desk.verify(deskCa.publicKey)).toBe(true);
    expect(desk.keyUsage).toEqual([CLIENT_AUTH]);
    expect(desk.keyUsage).not.toContain(SERVER_AUTH);
    // A CA of its own: the desk's certificate does not chain to the link's CAs, nor theirs to it.
    for (const other of [clientCa, approverCa]) {
      expect(desk.verify(other.publicKey)).toBe(false);
      expect(other.fingerprint256).not.toBe(deskCa.fingerprint256);
    }
    expect(approver.verify(deskCa.publicKey)).toBe(false);
    expect(pem("client.pem").verify(deskCa.publicKey)).toBe(false);
  });

  test("a desk file already there: nothing is written, and the file is named", async () => {
    await using tmp = tempDir();
    const dir = join(tmp.path, "certs");
    expect((await runBinary(["certs", dir, "--desk"])).code).toBe(0);
    const before = readFileSync(join(dir, "desk.key"), "utf8");
    const r = await runBinary(["certs", dir, "--desk"]);
    expect(r).toEqual({
      code: 1,
      stdout: "",
      stderr: `ask-only: error: ${join(dir, "desk-ca.pem")} already exists; refusing to overwrite it\nask-only: hint: choose another directory or move the old files away\n`,
    });
    expect(readFileSync(join(dir, "desk.key"), "utf8")).toBe(before);
  });

  test("--desk with --host is a usage error: --host names the approver's certificate", async () => {
    await using tmp = tempDir();
    const r = await runBinary(["certs", join(tmp.path, "c"), "--desk", "--host", "a.example"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toStartWith("ask-only: error: --host names the approver's certificate, which --desk does not make\n");
    expect(readdirSync(tmp.path)).toEqual([]);
  });
});
