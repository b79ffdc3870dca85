// The PostgreSQL adapter over TLS, against real servers started with TLS on and certificates
// made in the test: how each sslmode of a database URL is honoured, that verify-full refuses a
// server whose certificate names another host or comes from another CA, and that nothing in the
// environment (PGSSLMODE, NODE_TLS_REJECT_UNAUTHORIZED, PGDATABASE, PGOPTIONS, DATABASE_URL ...)
// changes where or how the adapter connects.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { classifyFailure } from "../../src/adapters/postgres/errors.ts";
import { PostgresServer } from "../helpers/postgres.ts";
import { makePostgresCerts } from "../helpers/postgres-certs.ts";
import { tempDir } from "../helpers/tmp.ts";

let good: PostgresServer;
let wrongName: PostgresServer;
let otherCa: PostgresServer;
let plain: PostgresServer;
const dir = tempDir();
const caFile = join(dir.path, "ca.pem");

beforeAll(async () => {
  const certs = await makePostgresCerts();
  writeFileSync(caFile, certs.caPem);
  [good, wrongName, otherCa, plain] = await Promise.all([
    PostgresServer.start({ tls: certs.server, tlsOnly: true }),
    PostgresServer.start({ tls: certs.wrongName, tlsOnly: true }),
    PostgresServer.start({ tls: certs.otherCa, tlsOnly: true }),
    PostgresServer.start(),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([good, wrongName, otherCa, plain].map((s) => s?.dispose()));
  dir[Symbol.dispose]();
}, 60_000);

type Landed = { ssl: boolean; cipher: string | null; version: string | null } | { error: string; kind: string };

/** Connects through the adapter with `params` and says how the connection went. */
async function connect(server: PostgresServer, params: Record<string, string>, host = "127.0.0.1"): Promise<Landed> {
  const url = server.url("postgres", params).replace("@127.0.0.1:", `@${host}:`);
  const sql = openPool(parseDatabaseUrl(url), { max: 1 });
  try {
    const [row] = await sql`SELECT ssl, cipher, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`;
    return { ssl: row.ssl, cipher: row.cipher, version: row.version };
  } catch (err) {
    return { error: (err as { code?: string }).code ?? String(err), kind: classifyFailure(err) };
  } finally {
    await sql.close();
  }
}

const encrypted = { ssl: true, cipher: expect.any(String), version: expect.stringMatching(/^TLSv1\.[23]$/) };
const full = () => ({ sslmode: "verify-full", sslrootcert: caFile });

describe("sslmode=verify-full with sslrootcert", () => {
  test("connects, encrypted, to the server whose certificate names 127.0.0.1 (or localhost) and comes from the CA", async () => {
    expect(await connect(good, full())).toEqual(encrypted);
    expect(await connect(good, full(), "localhost")).toEqual(encrypted);
  });

  test("refuses a server whose certificate names another host", async () => {
    expect(await connect(wrongName, full())).toEqual({ error: "ERR_TLS_CERT_ALTNAME_INVALID", kind: "unavailable" });
    expect(await connect(wrongName, full(), "localhost")).toEqual({ error: "ERR_TLS_CERT_ALTNAME_INVALID", kind: "unavailable" });
  });

  test("refuses a certificate from another CA, and a server without TLS", async () => {
    expect(await connect(otherCa, full())).toEqual({ error: "UNABLE_TO_VERIFY_LEAF_SIGNATURE", kind: "unavailable" });
    expect(await connect(plain, full())).toEqual({ error: "ERR_POSTGRES_TLS_NOT_AVAILABLE", kind: "unavailable" });
  });

  test("sslrootcert=system trusts the system's CAs, not ours", async () => {
    expect(await connect(good, { sslmode: "verify-full", sslrootcert: "system" })).toEqual({ error: "UNABLE_TO_VERIFY_LEAF_SIGNATURE", kind: "unavailable" });
  });

  test("binds the login to the TLS channel when asked (SCRAM-SHA-256-PLUS)", async () => {
    expect(await connect(good, { ...full(), channel_binding: "require" })).toEqual(encrypted);
  });
});

describe("sslmode=verify-ca", () => {
  test("checks the chain but not the name", async () => {
    expect(await connect(good, { sslmode: "verify-ca", sslrootcert: caFile })).toEqual(encrypted);
    expect(await connect(wrongName, { sslmode: "verify-ca", sslrootcert: caFile })).toEqual(encrypted);
    expect(await connect(otherCa, { sslmode: "verify-ca", sslrootcert: caFile })).toEqual({ error: "UNABLE_TO_VERIFY_LEAF_SIGNATURE", kind: "unavailable" });
  });
});

describe("sslmode=require", () => {
  test("encrypts whatever the certificate, and never falls back to the clear", async () => {
    expect(await connect(good, { sslmode: "require" })).toEqual(encrypted);
    expect(await connect(wrongName, { sslmode: "require" })).toEqual(encrypted);
    expect(await connect(otherCa, { sslmode: "require" })).toEqual(encrypted);
    expect(await connect(plain, { sslmode: "require" })).toEqual({ error: "ERR_POSTGRES_TLS_NOT_AVAILABLE", kind: "unavailable" });
  });
});

describe("sslmode=disable (or none, on this machine)", () => {
  test("connects in the clear where the server allows it, and is refused by a server that requires TLS", async () => {
    expect(await connect(plain, {})).toEqual({ ssl: false, cipher: null, version: null });
    expect(await connect(plain, { sslmode: "disable" })).toEqual({ ssl: false, cipher: null, version: null });
    expect(await connect(good, { sslmode: "disable" })).toEqual({ error: "ERR_POSTGRES_SERVER_ERROR", kind: "unavailable" });
  });
});

describe("the environment cannot change the connection", () => {
  async function probe(url: string, env: Record<string, string>): Promise<Record<string, unknown>> {
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "../fixtures/postgres-env-probe.ts")], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ASK_ONLY_TEST_DATABASE_URL: url, ...env },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
    expect(`${code} ${err}`).toBe("0 ");
    return JSON.parse(out);
  }

  test("NODE_TLS_REJECT_UNAUTHORIZED=0 does not let verify-full accept the wrong name", async () => {
    const url = wrongName.url("postgres", full());
    expect(await probe(url, { NODE_TLS_REJECT_UNAUTHORIZED: "0" })).toEqual({ error: "ERR_TLS_CERT_ALTNAME_INVALID" });
  });

  test("PGSSLMODE, PGDATABASE, PGOPTIONS, PGAPPNAME, PGHOST, PGPORT, PGUSER, PGPASSWORD and DATABASE_URL change nothing", async () => {
    const other = `postgres://intruder:x@127.0.0.1:1/elsewhere?sslmode=disable&path=/tmp`;
    const polluted = {
      PGSSLMODE: "disable",
      PGDATABASE: "template1",
      PGOPTIONS: "-c search_path=public -c default_transaction_read_only=on",
      PGAPPNAME: "not-the-desk",
      PGHOST: "192.0.2.1",
      PGPORT: "1",
      PGUSER: "intruder",
      PGPASSWORD: "x",
      PGCHANNELBINDING: "disable",
      DATABASE_URL: other,
      POSTGRES_URL: other,
      TLS_DATABASE_URL: other,
    };
    const landed = { database: "postgres", search_path: "ask_only", application_name: "ask-only desk", read_only: "off", port: good.port };
    expect(await probe(good.url("postgres", full()), polluted)).toEqual({ ...landed, ssl: true });
    expect(await probe(plain.url("postgres"), polluted)).toEqual({ ...landed, port: plain.port, ssl: false });
  });
});
