// Certificates for a PostgreSQL server under TLS, made per run with @peculiar/x509 as
// `ask-only certs` makes its own (src/core/tls/generate.ts): one CA, a server certificate for
// localhost and 127.0.0.1, one for another name signed by the same CA, and one for the right
// names from a CA nobody trusts.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(globalThis.crypto);

const EC_KEY: EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const SIGNING: EcdsaParams = { name: "ECDSA", hash: "SHA-256" };
const DAY_MS = 86_400_000;

type Issued = { cert: x509.X509Certificate; keys: CryptoKeyPair };

const serial = () => Buffer.from(crypto.getRandomValues(new Uint8Array(16)).map((b, i) => (i === 0 ? (b & 0x7f) | 1 : b))).toString("hex");

async function makeCa(name: string, now: Date): Promise<Issued> {
  const keys = await crypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${name}, O=ask-only tests`,
    notBefore: new Date(now.getTime() - DAY_MS),
    notAfter: new Date(now.getTime() + 30 * DAY_MS),
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

async function makeServer(ca: Issued, names: { dns: string[]; ip: string[] }, now: Date): Promise<Issued> {
  const keys = await crypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${names.dns[0] ?? names.ip[0]}, O=ask-only tests`,
    issuer: ca.cert.subject,
    notBefore: new Date(now.getTime() - DAY_MS),
    notAfter: new Date(now.getTime() + 30 * DAY_MS),
    signingAlgorithm: SIGNING,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
      new x509.SubjectAlternativeNameExtension(
        [...names.dns.map((value) => ({ type: "dns" as const, value })), ...names.ip.map((value) => ({ type: "ip" as const, value }))],
        false,
      ),
      await x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey),
    ],
  });
  return { cert, keys };
}

const pem = (cert: x509.X509Certificate) => `${cert.toString("pem")}\n`;

async function keyPem(key: CryptoKey): Promise<string> {
  return `${x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY")}\n`;
}

export type ServerPems = { certPem: string; keyPem: string };

export type PostgresCerts = {
  /** The CA the clients trust (sslrootcert). */
  caPem: string;
  /** For localhost and 127.0.0.1, by that CA. */
  server: ServerPems;
  /** For db.example.invalid only, by the same CA. */
  wrongName: ServerPems;
  /** For localhost and 127.0.0.1, by a CA nobody trusts. */
  otherCa: ServerPems;
};

export async function makePostgresCerts(now = new Date()): Promise<PostgresCerts> {
  const ca = await makeCa("ask-only test database CA", now);
  const stranger = await makeCa("someone else's CA", now);
  const right = { dns: ["localhost"], ip: ["127.0.0.1"] };
  const server = await makeServer(ca, right, now);
  const wrong = await makeServer(ca, { dns: ["db.example.invalid"], ip: [] }, now);
  const other = await makeServer(stranger, right, now);
  const pems = async (i: Issued) => ({ certPem: pem(i.cert), keyPem: await keyPem(i.keys.privateKey) });
  return { caPem: pem(ca.cert), server: await pems(server), wrongName: await pems(wrong), otherCa: await pems(other) };
}
