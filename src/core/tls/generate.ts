// Certificates for the mutual-TLS link between serve-mcp (the agent's side) and the approver
// (the person's side). Two separate CAs: the approver CA signs only the approver's server
// certificate, the client CA signs only the client certificate, so neither side's certificate
// can stand in for the other's.
import { isIP } from "node:net";
import type * as X509 from "@peculiar/x509";

// @peculiar/x509 needs the Reflect metadata polyfill in place before its module runs; a static
// import list gives no such order once bundled, so both load here, in sequence, on first use.
let x509: typeof X509;
async function loadX509(): Promise<typeof X509> {
  if (!x509) {
    await import("reflect-metadata");
    x509 = await import("@peculiar/x509");
    x509.cryptoProvider.set(globalThis.crypto);
  }
  return x509;
}

const EC_KEY = { name: "ECDSA", namedCurve: "P-256" } as const;
const SIGNING = { name: "ECDSA", hash: "SHA-256" } as const;
const DAY_MS = 86_400_000;
/** Leaves live about two years; the CAs outlive them, but their keys are discarded anyway. */
const LEAF_DAYS = 825;
const CA_DAYS = 3650;
/** Clock skew between the two machines of the link. */
const BACKDATE_MS = 5 * 60_000;

/** The names every approver certificate carries, so a local set-up works without --host. */
const DEFAULT_SERVER_NAMES = ["localhost", "127.0.0.1", "::1"] as const;

export type LinkFile = { name: string; contents: string; secret: boolean; role: string };

export type LinkCertificates = { files: LinkFile[] };

/** A host name as it may appear in a SAN: an IP literal or a DNS name (labels, optional `*.`). */
export function isValidHostName(host: string): boolean {
  if (isIP(host) !== 0) return true;
  if (host.length === 0 || host.length > 253) return false;
  const labels = host.split(".");
  return labels.every((label, i) => (label === "*" && i === 0 && labels.length > 2) || /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i.test(label));
}

function serialNumber(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0]! & 0x7f) | 0x01; // positive and never shortened by a leading zero
  return Buffer.from(bytes).toString("hex");
}

function sanEntries(hosts: readonly string[]): X509.JsonGeneralName[] {
  const unique = [...new Set([...DEFAULT_SERVER_NAMES, ...hosts])];
  return unique.map((host) => ({ type: isIP(host) === 0 ? "dns" : "ip", value: host }));
}

async function keyPair(): Promise<CryptoKeyPair> {
  return crypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"]);
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = await crypto.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(der, "PRIVATE KEY");
}

type Issued = { cert: X509.X509Certificate; keys: CryptoKeyPair };

async function makeCa(commonName: string, now: Date): Promise<Issued> {
  const keys = await keyPair();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: `CN=${commonName}, O=ask-only`,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + CA_DAYS * DAY_MS),
    signingAlgorithm: SIGNING,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, keys };
}

async function makeLeaf(ca: Issued, commonName: string, usage: X509.ExtendedKeyUsage, now: Date, extra: X509.Extension[]): Promise<Issued> {
  const keys = await keyPair();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject: `CN=${commonName}, O=ask-only`,
    issuer: ca.cert.subject,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + LEAF_DAYS * DAY_MS),
    signingAlgorithm: SIGNING,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([usage], false),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey),
      ...extra,
    ],
  });
  return { cert, keys };
}

/**
 * Makes both CAs and both leaf certificates. The CA private keys never leave this function:
 * nobody can mint another certificate that either side trusts (run `certs` again instead).
 */
export async function generateLinkCertificates(options: { hosts: readonly string[]; now: Date }): Promise<LinkCertificates> {
  for (const host of options.hosts) {
    if (!isValidHostName(host)) throw new RangeError(`not a host name or IP address: ${host}`);
  }
  await loadX509();
  const approverCa = await makeCa("ask-only approver CA", options.now);
  const clientCa = await makeCa("ask-only client CA", options.now);
  const approver = await makeLeaf(approverCa, "ask-only approver", x509.ExtendedKeyUsage.serverAuth, options.now, [
    new x509.SubjectAlternativeNameExtension(sanEntries(options.hosts), false),
  ]);
  const client = await makeLeaf(clientCa, "ask-only serve-mcp", x509.ExtendedKeyUsage.clientAuth, options.now, []);
  const pem = (cert: X509.X509Certificate) => `${cert.toString("pem")}\n`;
  return {
    files: [
      { name: "approver-ca.pem", contents: pem(approverCa.cert), secret: false, role: "serve-mcp trusts it (ASK_ONLY_PAY_CA)" },
      { name: "client-ca.pem", contents: pem(clientCa.cert), secret: false, role: "approver trusts it (--ca)" },
      { name: "approver.pem", contents: pem(approver.cert), secret: false, role: "approver's certificate (--cert)" },
      { name: "approver.key", contents: await privateKeyPem(approver.keys.privateKey), secret: true, role: "approver's key (--key)" },
      { name: "client.pem", contents: pem(client.cert), secret: false, role: "serve-mcp's certificate (ASK_ONLY_PAY_CLIENT_CERT)" },
      { name: "client.key", contents: await privateKeyPem(client.keys.privateKey), secret: true, role: "serve-mcp's key (ASK_ONLY_PAY_CLIENT_KEY)" },
    ],
  };
}

/**
 * The desk's own link to the approver: a third CA and one client certificate under it. The
 * approver's desk listener trusts only this CA, so the agents' client certificate can never
 * send the desk's asks, and the desk's certificate is refused where agents ask. The CA's private
 * key never leaves this function. The desk trusts the approver with the link's approver-ca.pem.
 */
export async function generateDeskCertificates(options: { now: Date }): Promise<LinkCertificates> {
  await loadX509();
  const deskCa = await makeCa("ask-only desk CA", options.now);
  const desk = await makeLeaf(deskCa, "ask-only desk", x509.ExtendedKeyUsage.clientAuth, options.now, []);
  return {
    files: [
      { name: "desk-ca.pem", contents: `${deskCa.cert.toString("pem")}\n`, secret: false, role: "approver trusts it on its desk listener (--desk-ca)" },
      { name: "desk.pem", contents: `${desk.cert.toString("pem")}\n`, secret: false, role: "the desk's client certificate, for its link to the approver" },
      { name: "desk.key", contents: await privateKeyPem(desk.keys.privateKey), secret: true, role: "the desk's key" },
    ],
  };
}
