// Loading the three files of one side of the mTLS link (certificate, key, the other side's CA)
// and checking them before anything listens or connects: a bad file found at start-up gets a
// clear error naming it, instead of a handshake that fails later with no word on why.
import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

export type TlsRole = "cert" | "key" | "ca";
export type TlsPaths = Record<TlsRole, string>;

/** Which side loads the files: it decides the file names the hints suggest. */
export type TlsSide = "approver" | "client" | "desk";

/** A file that fails a check: the message names the file and how it was given; the hint says what to do. */
export class TlsLoadError extends Error {
  override name = "TlsLoadError";
  constructor(
    message: string,
    readonly hint: string,
  ) {
    super(message);
  }
}

export type LoadedTls = {
  /** PEM text, as Bun.serve and fetch take it. */
  cert: string;
  key: string;
  ca: string;
  paths: TlsPaths;
  /** The trusted CA, for the start-up line: its subject on one line and SHA-256 fingerprint. */
  caSubject: string;
  caFingerprint256: string;
};

const EXPECTED: Record<TlsSide, Record<TlsRole, string>> = {
  approver: { cert: "approver.pem", key: "approver.key", ca: "client-ca.pem" },
  client: { cert: "client.pem", key: "client.key", ca: "approver-ca.pem" },
  desk: { cert: "desk.pem", key: "desk.key", ca: "approver-ca.pem" },
};

const NOUN: Record<TlsRole, string> = { cert: "certificate", key: "private key", ca: "CA certificate" };

/**
 * Reads and checks the files: each readable, PEM that parses, the key matching the certificate,
 * the certificate and the CA within their validity, the CA really a CA, and the CA not the one
 * that signed this side's own certificate (the link uses two separate CAs, so that one side's
 * certificate can never stand in for the other's). `labels` says how each file was named
 * (`--cert`, `ASK_ONLY_PAY_CLIENT_CERT`, ...), for the error.
 */
export function loadTlsFiles(given: TlsPaths, options: { side: TlsSide; labels: Record<TlsRole, string>; now: Date; cwd: string }): LoadedTls {
  const paths: TlsPaths = {
    cert: resolve(options.cwd, given.cert),
    key: resolve(options.cwd, given.key),
    ca: resolve(options.cwd, given.ca),
  };
  const expected = EXPECTED[options.side];
  const where = (role: TlsRole) => `${paths[role]} (${options.labels[role]})`;
  const fail = (message: string, hint: string): never => {
    throw new TlsLoadError(message, hint);
  };

  const read = (role: TlsRole): string => {
    try {
      return readFileSync(paths[role], "utf8");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? "unreadable";
      return fail(
        `cannot read the ${NOUN[role]} ${where(role)}: ${code}`,
        `check the path and its permissions; \`ask-only certs DIR\` makes ${expected[role]}`,
      );
    }
  };
  const certificate = (role: "cert" | "ca", pem: string): X509Certificate => {
    try {
      if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no certificate block");
      return new X509Certificate(pem);
    } catch {
      return fail(`${where(role)} is not a PEM certificate`, `${options.labels[role]} takes a file such as ${expected[role]}`);
    }
  };

  const certPem = read("cert");
  const keyPem = read("key");
  const caPem = read("ca");
  const cert = certificate("cert", certPem);
  const ca = certificate("ca", caPem);
  let keyObject: KeyObject;
  try {
    keyObject = createPrivateKey(keyPem);
  } catch {
    return fail(`${where("key")} is not a PEM private key`, `${options.labels.key} takes a file such as ${expected.key}`);
  }

  if (!cert.checkPrivateKey(keyObject)) {
    fail(
      `the private key ${where("key")} does not match the certificate ${where("cert")}`,
      `use the key made with that certificate (${expected.cert} goes with ${expected.key})`,
    );
  }
  if (cert.ca) {
    fail(`${where("cert")} is a CA certificate, not this side's own certificate`, `${options.labels.cert} takes ${expected.cert}`);
  }
  if (!ca.ca) {
    fail(`${where("ca")} is not a CA certificate`, `${options.labels.ca} takes the other side's CA, ${expected.ca}`);
  }
  for (const [role, c] of [
    ["cert", cert],
    ["ca", ca],
  ] as const) {
    if (c.validToDate.getTime() <= options.now.getTime()) {
      fail(
        `the ${NOUN[role]} ${where(role)} expired on ${c.validToDate.toISOString()}`,
        "make new certificates with `ask-only certs DIR` into a new directory",
      );
    }
    if (c.validFromDate.getTime() > options.now.getTime()) {
      fail(`the ${NOUN[role]} ${where(role)} is not valid before ${c.validFromDate.toISOString()}`, "check this machine's clock");
    }
  }
  // Trusting the CA that signed our own certificate would let this side's certificate (or any
  // sibling) pass as the other side; the two CAs are separate by design.
  if (cert.checkIssued(ca) && cert.verify(ca.publicKey)) {
    fail(`${where("ca")} is the CA that signed ${where("cert")}, not the other side's CA`, `${options.labels.ca} takes ${expected.ca}`);
  }

  return {
    cert: certPem,
    key: keyPem,
    ca: caPem,
    paths,
    caSubject: ca.subject.split("\n").join(", "),
    caFingerprint256: ca.fingerprint256,
  };
}

/** The desk CA, checked for the approver's desk listener: its subject and fingerprint, for the start-up line. */
export type LoadedDeskCa = { ca: string; path: string; caSubject: string; caFingerprint256: string };

/**
 * Reads and checks the CA the approver's desk listener trusts (`desk-ca.pem`): readable, a PEM
 * CA certificate within its validity, and a CA of its own. It must not be the client CA (an
 * agent's certificate would then reach the desk's listener and could ask to spend) nor the CA
 * that signed the approver's own certificate.
 */
export function loadDeskCa(given: string, options: { label: string; approver: LoadedTls; now: Date; cwd: string }): LoadedDeskCa {
  const path = resolve(options.cwd, given);
  const where = `${path} (${options.label})`;
  let pem: string;
  try {
    pem = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "unreadable";
    throw new TlsLoadError(
      `cannot read the desk CA certificate ${where}: ${code}`,
      "check the path and its permissions; `ask-only certs DIR --desk` makes desk-ca.pem",
    );
  }
  let ca: X509Certificate;
  try {
    if (!pem.includes("-----BEGIN CERTIFICATE-----")) throw new Error("no certificate block");
    ca = new X509Certificate(pem);
  } catch {
    throw new TlsLoadError(`${where} is not a PEM certificate`, `${options.label} takes desk-ca.pem`);
  }
  if (!ca.ca) throw new TlsLoadError(`${where} is not a CA certificate`, `${options.label} takes desk-ca.pem, the CA of the desk's certificate`);
  if (ca.validToDate.getTime() <= options.now.getTime()) {
    throw new TlsLoadError(
      `the desk CA certificate ${where} expired on ${ca.validToDate.toISOString()}`,
      "make new desk certificates with `ask-only certs DIR --desk` into a new directory",
    );
  }
  if (ca.validFromDate.getTime() > options.now.getTime()) {
    throw new TlsLoadError(`the desk CA certificate ${where} is not valid before ${ca.validFromDate.toISOString()}`, "check this machine's clock");
  }
  const clientCa = new X509Certificate(options.approver.ca);
  const own = new X509Certificate(options.approver.cert);
  // The two listeners tell the desk from an agent only by which CA signed the client: one CA for both would let an agent ask to spend.
  if (ca.fingerprint256 === clientCa.fingerprint256 || ca.publicKey.equals(clientCa.publicKey)) {
    throw new TlsLoadError(
      `${where} is the client CA the agents' listener trusts (${options.approver.paths.ca})`,
      "the desk needs a CA of its own: run `ask-only certs DIR --desk` and give its desk-ca.pem",
    );
  }
  if (own.checkIssued(ca) && own.verify(ca.publicKey)) {
    throw new TlsLoadError(`${where} is the CA that signed the approver's own certificate`, `${options.label} takes desk-ca.pem`);
  }
  return { ca: pem, path, caSubject: ca.subject.split("\n").join(", "), caFingerprint256: ca.fingerprint256 };
}
