// The start-up checks on the files of the mTLS link: each failure names the file and how it was
// given, with a hint; a good set loads.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateLinkCertificates } from "../../src/core/tls/generate.ts";
import { loadTlsFiles, type TlsPaths, TlsLoadError } from "../../src/core/tls/load.ts";
import { type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { makeLinkPems } from "../helpers/certs.ts";
import { tempDir } from "../helpers/tmp.ts";

const dir = tempDir("ask-only-tls-load-");
let link: LinkPaths;
let other: LinkPaths;
let old: LinkPaths;
const labels = { cert: "--cert", key: "--key", ca: "--ca" };
const now = new Date();

afterAll(() => dir[Symbol.dispose]());

beforeAll(async () => {
  link = await writeLink(join(dir.path));
  const otherDir = join(dir.path, "other");
  const oldDir = join(dir.path, "old");
  await Bun.write(join(otherDir, ".keep"), "");
  await Bun.write(join(oldDir, ".keep"), "");
  other = await writeLink(otherDir, await makeLinkPems());
  // Made 900 days ago: the leaves (825 days) have expired, the CAs (3650 days) have not.
  const { files } = await generateLinkCertificates({ hosts: [], now: new Date(now.getTime() - 900 * 86_400_000) });
  const pems = Object.fromEntries(files.map((f) => [f.name, f.contents]));
  old = await writeLink(oldDir, {
    approverCa: pems["approver-ca.pem"]!,
    clientCa: pems["client-ca.pem"]!,
    approverCert: pems["approver.pem"]!,
    approverKey: pems["approver.key"]!,
    clientCert: pems["client.pem"]!,
    clientKey: pems["client.key"]!,
  });
});

function load(paths: TlsPaths, side: "approver" | "client" = "approver") {
  return loadTlsFiles(paths, { side, labels, now, cwd: dir.path });
}

function refusal(paths: TlsPaths, side: "approver" | "client" = "approver"): TlsLoadError {
  try {
    load(paths, side);
  } catch (err) {
    if (err instanceof TlsLoadError) return err;
    throw err;
  }
  throw new Error("the files were accepted");
}

const approverSet = (l: LinkPaths): TlsPaths => ({ cert: l.approverCert, key: l.approverKey, ca: l.clientCa });
const clientSet = (l: LinkPaths): TlsPaths => ({ cert: l.clientCert, key: l.clientKey, ca: l.approverCa });

describe("loadTlsFiles", () => {
  test("a good set loads, for each side, with the CA's subject and fingerprint", () => {
    const a = load(approverSet(link));
    expect(a.caSubject).toBe("CN=ask-only client CA, O=ask-only");
    expect(a.caFingerprint256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    expect(a.cert).toStartWith("-----BEGIN CERTIFICATE-----");
    expect(load(clientSet(link), "client").caSubject).toBe("CN=ask-only approver CA, O=ask-only");
  });

  test("relative paths resolve against the given directory", () => {
    expect(load({ cert: "approver.pem", key: "approver.key", ca: "client-ca.pem" }).paths.cert).toBe(join(dir.path, "approver.pem"));
  });

  test("a missing file is named with its flag and a hint", () => {
    const e = refusal({ ...approverSet(link), key: join(dir.path, "nope.key") });
    expect(e.message).toBe(`cannot read the private key ${join(dir.path, "nope.key")} (--key): ENOENT`);
    expect(e.hint).toContain("approver.key");
  });

  test("an unreadable file is refused", () => {
    if (process.getuid?.() === 0) return; // root reads everything; the check still runs for others
    const path = join(dir.path, "unreadable.pem");
    writeFileSync(path, "x");
    chmodSync(path, 0);
    expect(refusal({ ...approverSet(link), cert: path }).message).toContain("EACCES");
  });

  test("files that are not PEM, or the wrong kind of PEM, are refused", () => {
    const junk = join(dir.path, "junk.pem");
    writeFileSync(junk, "hello\n");
    expect(refusal({ ...approverSet(link), cert: junk }).message).toBe(`${junk} (--cert) is not a PEM certificate`);
    expect(refusal({ ...approverSet(link), ca: link.approverKey }).message).toContain("(--ca) is not a PEM certificate");
    expect(refusal({ ...approverSet(link), key: link.approverCert }).message).toContain("(--key) is not a PEM private key");
  });

  test("a key that does not match the certificate is refused", () => {
    const e = refusal({ ...approverSet(link), key: link.clientKey });
    expect(e.message).toContain("does not match the certificate");
    expect(refusal({ ...approverSet(link), key: other.approverKey }).message).toContain("does not match");
  });

  test("the CA file must hold a CA", () => {
    expect(refusal({ ...approverSet(link), ca: link.clientCert }).message).toContain("is not a CA certificate");
  });

  test("trusting the CA that signed this side's own certificate is refused", () => {
    const e = refusal({ ...approverSet(link), ca: link.approverCa });
    expect(e.message).toContain("is the CA that signed");
    expect(e.hint).toBe("--ca takes client-ca.pem");
    expect(refusal({ ...clientSet(link), ca: link.clientCa }, "client").hint).toBe("--ca takes approver-ca.pem");
  });

  test("an expired certificate is refused with its date", () => {
    const e = refusal(approverSet(old));
    expect(e.message).toMatch(/\(--cert\) expired on \d{4}-/);
    expect(e.hint).toContain("ask-only certs");
  });

  test("a certificate not yet valid is refused", () => {
    const e = (() => {
      try {
        loadTlsFiles(approverSet(link), { side: "approver", labels, now: new Date(now.getTime() - 86_400_000), cwd: dir.path });
      } catch (err) {
        return err as TlsLoadError;
      }
      throw new Error("accepted");
    })();
    expect(e.message).toContain("is not valid before");
  });
});
