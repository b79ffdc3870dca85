// A desk node across machines, encrypted both ways (compiled binary): it serves HTTPS itself and
// reaches PostgreSQL with sslmode=verify-full against a server started with TLS only and a
// certificate made in the test; a verify-full URL against a server whose certificate names
// another host stops the desk at start (exit 1), and sslmode=require encrypts without checking.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { DESK_TOKEN, startDeskProcess } from "../helpers/desk-process.ts";
import { PostgresServer } from "../helpers/postgres.ts";
import { makePostgresCerts } from "../helpers/postgres-certs.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(60_000);

let good: PostgresServer;
let wrongName: PostgresServer;
const dir = tempDir("pg-desk-tls-");
const file = (name: string) => join(dir.path, name);

beforeAll(async () => {
  const certs = await makePostgresCerts();
  writeFileSync(file("ca.pem"), certs.caPem);
  // The desk's own HTTPS certificate: the same CA's, for 127.0.0.1.
  writeFileSync(file("desk.pem"), certs.server.certPem);
  writeFileSync(file("desk.key"), certs.server.keyPem, { mode: 0o600 });
  [good, wrongName] = await Promise.all([
    PostgresServer.start({ tls: certs.server, tlsOnly: true }),
    PostgresServer.start({ tls: certs.wrongName, tlsOnly: true }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([good, wrongName].map((s) => s?.dispose()));
  dir[Symbol.dispose]();
}, 60_000);

describe("a desk node over TLS both ways (binary)", () => {
  test("HTTPS for agents, verify-full to PostgreSQL: it serves, and desk check passes over the same URL", async () => {
    const { name } = await good.createDatabase();
    const url = good.url(name, { sslmode: "verify-full", sslrootcert: file("ca.pem") });
    const node = await startDeskProcess(file("node-good"), ["--tls-cert", file("desk.pem"), "--tls-key", file("desk.key")], {
      env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: url },
    });
    try {
      expect(node.url).toStartWith("https://");
      expect(node.stderr()).toContain("TLS verify-full");
      const health = await fetch(`${node.url}/healthz`, { tls: { ca: Bun.file(file("ca.pem")) } });
      expect(health.status).toBe(200);
    } finally {
      expect(await node.stop()).toBe(0);
    }
    const check = await runBinary(["desk", "check"], { env: { ASK_ONLY_DESK_DATABASE_URL: url } });
    expect([check.code, check.stderr]).toEqual([0, ""]);
  });

  test("verify-full against a certificate for another name: the desk refuses to start, naming the database", async () => {
    const { name } = await wrongName.createDatabase();
    const url = wrongName.url(name, { sslmode: "verify-full", sslrootcert: file("ca.pem") });
    const r = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", file("node-wrong")], {
      env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ASK_ONLY_DESK_DATABASE_URL: url },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`ask-only: error: cannot use the database postgres://`);
    expect(r.stderr).toContain("ERR_TLS_CERT_ALTNAME_INVALID");
    expect(r.stderr).not.toContain(wrongName.password);
    // sslmode=require encrypts and checks no name: the same server is accepted.
    const required = await runBinary(["desk", "check"], { env: { ASK_ONLY_DESK_DATABASE_URL: wrongName.url(name, { sslmode: "require" }) } });
    expect(required.code).toBe(1);
    expect(required.stderr).toContain("the database holds no desk ledger");
  });

  test("a password in --database is refused (the process list shows it); the same URL in the variable is taken", async () => {
    for (const args of [
      ["desk", "--listen", "127.0.0.1:0", "--data", file("node-flag")],
      ["desk", "check"],
    ]) {
      const r = await runBinary([...args, "--database", "postgres://desk:hunter2-secret@127.0.0.1:1/desk"]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("ask-only: error: --database holds a password, which every user of this machine can read in the process list");
      expect(r.stderr).not.toContain("hunter2");
    }
  });
});
