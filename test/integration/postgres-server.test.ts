// The test PostgreSQL server (test/helpers/postgres.ts): real PostgreSQL from npm, one server per
// file on 127.0.0.1 and a port picked free, a database per test, stop and restart on the same
// port and data, TLS on, and nothing left running afterwards, also when a test fails.
import { describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ourPostgresProcesses, PostgresServer, usePostgres } from "../helpers/postgres.ts";
import { makePostgresCerts } from "../helpers/postgres-certs.ts";

const pg = usePostgres();

/** Whether `pid` runs (a zombie waiting to be reaped does not). */
const alive = (pid: number) => {
  const stat = Bun.spawnSync(["ps", "-o", "stat=", "-p", String(pid)])
    .stdout.toString()
    .trim();
  return stat !== "" && !stat.startsWith("Z");
};

/** System V shared memory segments and POSIX ones in /dev/shm: a killed server could leave either. */
function sharedMemory(): { sysv: number; posix: number } {
  const ipcs = Bun.spawnSync(["ipcs", "-m"]);
  expect(ipcs.exitCode).toBe(0);
  const sysv = ipcs.stdout
    .toString()
    .split("\n")
    .filter((l) => /^0x[0-9a-f]+\s/.test(l)).length;
  const posix = existsSync("/dev/shm") ? readdirSync("/dev/shm").filter((f) => f.startsWith("PostgreSQL.")).length : 0;
  return { sysv, posix };
}

describe("the test PostgreSQL server", () => {
  test("runs PostgreSQL 18 on 127.0.0.1, not as root, with no unix socket", async () => {
    const db = await pg.server.createDatabase();
    const sql = new SQL(db.url);
    try {
      const [row] = await sql`SELECT current_setting('server_version_num')::int AS v, current_setting('listen_addresses') AS listen,
                                     current_setting('unix_socket_directories') AS sockets, current_database() AS db, host(inet_server_addr()) AS addr`;
      expect(row.v).toBeGreaterThanOrEqual(180000);
      expect({ listen: row.listen, sockets: row.sockets, db: row.db, addr: row.addr }).toEqual({
        listen: "127.0.0.1",
        sockets: "",
        db: db.name,
        addr: "127.0.0.1",
      });
    } finally {
      await sql.close();
    }
    const owner = Bun.spawnSync(["ps", "-o", "uid=", "-p", String(pg.server.pid)])
      .stdout.toString()
      .trim();
    expect(owner).not.toBe("0");
  });

  test("each test gets a database of its own", async () => {
    const a = await pg.server.createDatabase();
    const b = await pg.server.createDatabase();
    expect(a.name).not.toBe(b.name);
    const sa = new SQL(a.url);
    const sb = new SQL(b.url);
    try {
      await sa`CREATE TABLE only_here (x int)`;
      expect(await sb`SELECT to_regclass('only_here') AS t`).toEqual([{ t: null }] as never);
    } finally {
      await Promise.all([sa.close(), sb.close()]);
    }
  });

  test("the server asks for the password", async () => {
    const db = await pg.server.createDatabase();
    const sql = new SQL(db.url.replace(pg.server.password, "wrong"));
    try {
      expect(
        await sql`SELECT 1`.then(
          () => "connected",
          (e) => e.errno,
        ),
      ).toBe("28P01");
    } finally {
      await sql.close();
    }
  });

  test("stops and starts again on the same port with its data", async () => {
    const db = await pg.server.createDatabase();
    const sql = new SQL(db.url);
    try {
      await sql`CREATE TABLE kept (x int)`;
      await sql`INSERT INTO kept VALUES (42)`;
      const { port, pid } = pg.server;
      await pg.server.stop();
      expect(alive(pid!)).toBe(false);
      expect(pg.server.running).toBe(false);
      await pg.server.start();
      expect(pg.server.port).toBe(port);
      expect(pg.server.pid).not.toBe(pid);
      expect(await sql`SELECT x FROM kept`).toEqual([{ x: 42 }] as never);
      await pg.server.stop("immediate");
      await pg.server.start();
      expect(await sql`SELECT x FROM kept`).toEqual([{ x: 42 }] as never);
    } finally {
      await sql.close();
    }
  });

  test("two servers pick different free ports; a port found taken at start is retried on another", async () => {
    const squatter = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const other = await PostgresServer.start({ firstPort: squatter.port });
      const pid = other.pid!;
      try {
        expect(other.port).not.toBe(pg.server.port);
        expect(other.port).not.toBe(squatter.port);
      } finally {
        await other.dispose();
      }
      expect(existsSync(other.root)).toBe(false);
      expect(alive(pid)).toBe(false);
    } finally {
      squatter.stop(true);
    }
  });

  test("starts with TLS on: the connection is encrypted, and with tlsOnly one in the clear is refused", async () => {
    const certs = await makePostgresCerts();
    const server = await PostgresServer.start({ tls: certs.server, tlsOnly: true });
    try {
      const tls = new SQL(server.url("postgres", { sslmode: "require" }));
      const clear = new SQL(server.url("postgres", { sslmode: "disable" }));
      try {
        const [row] = await tls`SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`;
        expect(row.ssl).toBe(true);
        expect(row.version).toMatch(/^TLSv1\.[23]$/);
        const refused = await clear`SELECT 1`.then(
          () => null,
          (e) => e,
        );
        expect(refused?.errno).toBe("28000");
        expect(String(refused?.message)).toContain("no encryption");
      } finally {
        await Promise.all([tls.close(), clear.close()]);
      }
    } finally {
      await server.dispose();
    }
  });

  test("a process that exits without stopping its server leaves nothing running, and no shared memory (the exit hook)", async () => {
    const before = sharedMemory();
    const child = Bun.spawn([process.execPath, join(import.meta.dir, "../fixtures/postgres-abandoned.ts")], { stdout: "pipe", stderr: "pipe" });
    const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
    expect(`${code} ${err}`).toBe("0 ");
    const m = /postmaster pid (\d+) root (\S+)/.exec(out);
    expect(m).not.toBeNull();
    expect(alive(Number(m![1]))).toBe(false);
    expect(existsSync(m![2]!)).toBe(false);
    expect(sharedMemory()).toEqual(before);
  }, 60_000);

  test("a failing test file still stops its server (a child bun test)", async () => {
    const child = Bun.spawn([process.execPath, "test", join(import.meta.dir, "../fixtures/postgres-failing-suite.ts")], {
      cwd: join(import.meta.dir, "../.."),
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, NO_COLOR: "1" },
    });
    const [code, out, err] = await Promise.all([child.exited, new Response(child.stdout).text(), new Response(child.stderr).text()]);
    const text = out + err;
    expect(code).toBe(1);
    expect(text).toContain("2 fail");
    const m = /postmaster pid (\d+) root (\S+)/.exec(text);
    expect(m).not.toBeNull();
    expect(alive(Number(m![1]))).toBe(false);
    expect(existsSync(m![2]!)).toBe(false);
    expect(ourPostgresProcesses().filter((l) => l.includes(m![2]!))).toEqual([]);
  }, 60_000);
});
