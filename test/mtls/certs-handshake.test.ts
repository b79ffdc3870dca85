// The certificates of `certs` used by a real mutual-TLS server and client (Bun.serve + fetch).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type LinkPems, makeLinkPems } from "../helpers/certs.ts";

let link: LinkPems;
let foreign: LinkPems;
let server: ReturnType<typeof Bun.serve>;
let handled = 0;

beforeAll(async () => {
  [link, foreign] = await Promise.all([makeLinkPems(), makeLinkPems()]);
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: link.approverCert, key: link.approverKey, ca: link.clientCa, requestCert: true, rejectUnauthorized: true },
    fetch() {
      handled++;
      return new Response("ok");
    },
  });
});
afterAll(() => server.stop(true));

function call(tls: { cert?: string; key?: string; ca: string }, host = "localhost") {
  return fetch(`https://${host}:${server.port}/`, { tls, keepalive: false });
}

describe("mutual TLS with the certs output", () => {
  test("the client certificate is accepted, by name and by IP", async () => {
    const before = handled;
    for (const host of ["localhost", "127.0.0.1"]) {
      const res = await call({ cert: link.clientCert, key: link.clientKey, ca: link.approverCa }, host);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("ok");
    }
    expect(handled).toBe(before + 2);
  });

  test("a client with no certificate is refused before any handler", async () => {
    const before = handled;
    await expect(call({ ca: link.approverCa })).rejects.toThrow();
    expect(handled).toBe(before);
  });

  test("a client certificate from another CA is refused", async () => {
    const before = handled;
    await expect(call({ cert: foreign.clientCert, key: foreign.clientKey, ca: link.approverCa })).rejects.toThrow();
    expect(handled).toBe(before);
  });

  test("the approver's own certificate used as a client is refused", async () => {
    const before = handled;
    await expect(call({ cert: link.approverCert, key: link.approverKey, ca: link.approverCa })).rejects.toThrow();
    expect(handled).toBe(before);
  });

  test("a client that trusts another server CA refuses the server", async () => {
    const before = handled;
    await expect(call({ cert: link.clientCert, key: link.clientKey, ca: foreign.approverCa })).rejects.toThrow();
    expect(handled).toBe(before);
  });
});
