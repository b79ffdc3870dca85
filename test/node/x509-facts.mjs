// Run by Node.js (never Bun): what Node's own OpenSSL reads in the six files of `ask-only certs`,
// printed as one JSON object for the test to judge. Usage: node x509-facts.mjs DIR NAME...
// (the DNS names and IP addresses to try against the approver's certificate).
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const [dir, ...names] = process.argv.slice(2);
const read = (file) => readFileSync(join(dir, file));
const cert = (file) => new X509Certificate(read(file));

/**
 * The keyUsage bits (RFC 5280 4.2.1.3), read from the DER: node:crypto has no API for them.
 * The extension is OID 2.5.29.15, an optional critical flag, then an OCTET STRING holding a
 * BIT STRING: one byte of unused-bit count and up to two bytes of flags.
 */
const KEY_USAGE = [
  "digitalSignature",
  "nonRepudiation",
  "keyEncipherment",
  "dataEncipherment",
  "keyAgreement",
  "keyCertSign",
  "cRLSign",
  "encipherOnly",
  "decipherOnly",
];
function keyUsage(x509) {
  const der = x509.raw;
  const oid = Buffer.from([0x06, 0x03, 0x55, 0x1d, 0x0f]);
  let at = der.indexOf(oid);
  if (at < 0) return null;
  at += oid.length;
  let critical = false;
  if (der[at] === 0x01) {
    critical = der[at + 2] !== 0;
    at += 3;
  }
  if (der[at] !== 0x04 || der[at + 2] !== 0x03) throw new Error("keyUsage is not an OCTET STRING holding a BIT STRING");
  const bitsLength = der[at + 3];
  const bytes = der.subarray(at + 5, at + 4 + bitsLength);
  const set = KEY_USAGE.filter((_, i) => ((bytes[i >> 3] ?? 0) >> (7 - (i & 7))) & 1);
  return { critical, set };
}

/** basicConstraints (OID 2.5.29.19): cA and pathLenConstraint, or null when absent. */
function basicConstraints(x509) {
  const der = x509.raw;
  const oid = Buffer.from([0x06, 0x03, 0x55, 0x1d, 0x13]);
  let at = der.indexOf(oid);
  if (at < 0) return null;
  at += oid.length;
  if (der[at] === 0x01) at += 3;
  if (der[at] !== 0x04 || der[at + 2] !== 0x30) throw new Error("basicConstraints is not an OCTET STRING holding a SEQUENCE");
  const end = at + 4 + der[at + 3];
  at += 4;
  let ca = false;
  let pathLen = null;
  if (at < end && der[at] === 0x01) {
    ca = der[at + 2] !== 0;
    at += 3;
  }
  if (at < end && der[at] === 0x02) pathLen = der.readUIntBE(at + 2, der[at + 1]);
  return { ca, pathLen };
}

function describe(file, issuers) {
  const x = cert(file);
  return {
    subject: x.subject,
    issuer: x.issuer,
    ca: x.ca,
    extendedKeyUsage: x.keyUsage ?? [],
    keyUsage: keyUsage(x),
    basicConstraints: basicConstraints(x),
    subjectAltName: x.subjectAltName ?? null,
    curve: x.publicKey.asymmetricKeyDetails?.namedCurve,
    validFrom: new Date(x.validFrom).toISOString(),
    validTo: new Date(x.validTo).toISOString(),
    // Signed by each candidate: the signature verifies under its key and the names chain.
    signedBy: Object.fromEntries(issuers.map((i) => [i, x.verify(cert(i).publicKey) && x.checkIssued(cert(i))])),
  };
}

const issuers = ["approver-ca.pem", "client-ca.pem"];
const approver = cert("approver.pem");
const facts = {
  runtime: { node: process.versions.node, openssl: process.versions.openssl, bun: process.versions.bun ?? null },
  certificates: Object.fromEntries(["approver-ca.pem", "client-ca.pem", "approver.pem", "client.pem"].map((f) => [f, describe(f, issuers)])),
  keyMatches: {
    "approver.pem": approver.checkPrivateKey(createPrivateKey(read("approver.key"))),
    "client.pem": cert("client.pem").checkPrivateKey(createPrivateKey(read("client.key"))),
    "approver.pem with client.key": approver.checkPrivateKey(createPrivateKey(read("client.key"))),
  },
  // OpenSSL's own name matching (X509_check_host / X509_check_ip): the name, or null.
  names: Object.fromEntries(names.map((n) => [n, (/^[\d.]+$|:/.test(n) ? approver.checkIP(n) : approver.checkHost(n)) ?? null])),
};
process.stdout.write(`${JSON.stringify(facts)}\n`);
