// The mTLS link with a peer that is not Bun: Node.js and its OpenSSL (child processes running
// test/node/tls-client.mjs and tls-server.mjs), on certificates made by the compiled binary.
// As a client of the approver, OpenSSL checks the approver's chain for a TLS server and its name;
// as a stand-in approver, it checks serve-mcp's client certificate. Either side refuses what the
// other CA signed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startApprover } from "../helpers/approver-process.ts";
import { runBinary } from "../helpers/binary.ts";
import type { LinkPaths } from "../helpers/approver-link.ts";
import { connectServeMcp, serveMcpEnv } from "../helpers/mcp-client.ts";
import { runNode, startNodeServer } from "../helpers/node-peer.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";
import { tempDir } from "../helpers/tmp.ts";

type Answer =
  | { answered: true; status: number; body: string; authorized: boolean; protocol: string; peer: { subject: string; issuer: string } }
  | { answered: false; code: string };

const tmp = tempDir("ask-only-node-peer-");
const certs = join(tmp.path, "certs");
const other = join(tmp.path, "other");
const file = (dir: string, name: string) => join(dir, name);

beforeAll(async () => {
  for (const dir of [certs, other]) expect((await runBinary(["certs", dir])).code).toBe(0);
});
afterAll(() => tmp[Symbol.dispose]());

describe("Node's OpenSSL as the client of the approver", () => {
  /** servername null: none sent, so OpenSSL checks the address 127.0.0.1 against the SANs. */
  const request = (port: number, o: { servername?: string | null; cert?: string; key?: string; ca?: string }) =>
    runNode<Answer>("tls-client.mjs", [
      JSON.stringify({
        port,
        servername: o.servername === null ? undefined : (o.servername ?? "localhost"),
        ca: o.ca ?? file(certs, "approver-ca.pem"),
        cert: o.cert,
        key: o.key,
        method: "GET",
        path: "/v1/asks/K7Q2M4XZ3A",
      }),
    ]);

  test("with the client certificate it verifies the approver (chain, serverAuth, name) and gets an answer; without it, or with another CA's, the handshake is refused", async () => {
    await using approver = await startApprover({
      files: { cert: file(certs, "approver.pem"), key: file(certs, "approver.key"), ca: file(certs, "client-ca.pem") },
      db: join(tmp.path, "asks.db"),
    });
    const client = { cert: file(certs, "client.pem"), key: file(certs, "client.key") };
    for (const servername of ["localhost", null]) {
      const ok = await request(approver.port, { ...client, servername });
      expect(ok).toEqual({
        answered: true,
        status: 404,
        body: '{"error":"ASK_NOT_FOUND"}',
        authorized: true,
        protocol: "TLSv1.3",
        peer: { subject: "ask-only approver", issuer: "ask-only approver CA" },
      });
    }

    // The approver's name is checked by OpenSSL: a name not in its SANs is refused.
    expect(await request(approver.port, { ...client, servername: "evil.example" })).toEqual({ answered: false, code: "ERR_TLS_CERT_ALTNAME_INVALID" });
    // The approver is not trusted under another approver CA.
    expect(await request(approver.port, { ...client, ca: file(other, "approver-ca.pem") })).toEqual({
      answered: false,
      code: "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    });
    // The approver refuses a client with no certificate (a TLS 1.3 alert), and one from another
    // client CA or its own certificate (it resets the connection after the handshake).
    expect(await request(approver.port, {})).toEqual({ answered: false, code: "ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED" });
    for (const refused of [
      { cert: file(other, "client.pem"), key: file(other, "client.key") },
      { cert: file(certs, "approver.pem"), key: file(certs, "approver.key") },
    ]) {
      expect(await request(approver.port, refused)).toEqual({ answered: false, code: expect.stringMatching(/^(ECONNRESET|EPIPE|ERR_SSL_)/) });
    }
    expect(approver.err.text).not.toContain("internal fault");
  });
});

describe("Node's OpenSSL as the approver serve-mcp reaches", () => {
  test("serve-mcp presents its client certificate, which OpenSSL accepts under the client CA", async () => {
    await using server = await startNodeServer("tls-server.mjs", [
      JSON.stringify({ cert: file(certs, "approver.pem"), key: file(certs, "approver.key"), ca: file(certs, "client-ca.pem") }),
    ]);
    await using mcp = await connectServeMcp(serveMcpEnv(linkIn(certs), `https://localhost:${server.port}`));
    const asked = await mcp.request({ verb: "pay", ...PAY_FIELDS });
    expect(asked.isError).toBe(false);
    expect(asked.sc.state).toBe("pending");
    expect(server.lines()).toEqual([
      { method: "POST", url: "/v1/asks/pay", authorized: true, protocol: "TLSv1.3", peer: { subject: "ask-only serve-mcp", issuer: "ask-only client CA" } },
    ]);
  });

  test("a server that trusts another client CA refuses serve-mcp in the handshake: APPROVER_TLS_REFUSED, nothing sent", async () => {
    await using server = await startNodeServer("tls-server.mjs", [
      JSON.stringify({ cert: file(certs, "approver.pem"), key: file(certs, "approver.key"), ca: file(other, "client-ca.pem") }),
    ]);
    await using mcp = await connectServeMcp(serveMcpEnv(linkIn(certs), `https://localhost:${server.port}`));
    const asked = await mcp.request({ verb: "pay", ...PAY_FIELDS });
    expect(asked.sc).toEqual({ error: "APPROVER_TLS_REFUSED" });
    await server.out.waitFor(/"refused"/);
    expect(server.lines().filter((l) => "method" in l)).toEqual([]);
  });

  test("serve-mcp refuses a server certificate from another approver CA (checked by Bun, offered by OpenSSL)", async () => {
    await using server = await startNodeServer("tls-server.mjs", [
      JSON.stringify({ cert: file(other, "approver.pem"), key: file(other, "approver.key"), ca: file(certs, "client-ca.pem") }),
    ]);
    await using mcp = await connectServeMcp(serveMcpEnv(linkIn(certs), `https://localhost:${server.port}`));
    expect((await mcp.request({ verb: "pay", ...PAY_FIELDS })).sc).toEqual({ error: "APPROVER_TLS_REFUSED" });
    expect(server.lines().filter((l) => "method" in l)).toEqual([]);
  });
});

/** The six files of `ask-only certs` in `dir`, by role. */
function linkIn(dir: string): LinkPaths {
  return {
    approverCa: file(dir, "approver-ca.pem"),
    clientCa: file(dir, "client-ca.pem"),
    approverCert: file(dir, "approver.pem"),
    approverKey: file(dir, "approver.key"),
    clientCert: file(dir, "client.pem"),
    clientKey: file(dir, "client.key"),
  };
}
