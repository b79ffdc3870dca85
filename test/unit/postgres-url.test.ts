// The database URL as the PostgreSQL adapter reads it (src/adapters/postgres/connection.ts):
// what each part means, what is refused and why, and that no message or log line shows the
// password.
import { describe, expect, test } from "bun:test";
import { clientOptions, DatabaseUrlError, describeTarget, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";

const refusal = (url: string): string => {
  try {
    parseDatabaseUrl(url);
  } catch (err) {
    expect(err).toBeInstanceOf(DatabaseUrlError);
    expect((err as DatabaseUrlError).hint.length).toBeGreaterThan(0);
    expect((err as Error).message).not.toContain("s3cret");
    return (err as Error).message;
  }
  throw new Error(`accepted: ${url}`);
};

describe("parseDatabaseUrl", () => {
  test("reads every part, percent-decoded, with the defaults", () => {
    expect(parseDatabaseUrl("postgres://desk%40a:p%2Fss%3Aw@db.internal:6543/led%20ger?sslmode=verify-full&sslrootcert=/etc/ca.pem")).toEqual({
      host: "db.internal",
      port: 6543,
      user: "desk@a",
      password: "p/ss:w",
      database: "led ger",
      sslmode: "verify-full",
      sslrootcert: "/etc/ca.pem",
      channelBinding: "prefer",
      connectTimeoutS: 10,
      applicationName: "ask-only desk",
    });
    const t = parseDatabaseUrl("postgresql://u@[::1]/d");
    expect({ host: t.host, port: t.port, password: t.password, sslmode: t.sslmode, b: t.channelBinding }).toEqual({
      host: "::1",
      port: 5432,
      password: "",
      sslmode: "disable",
      b: "disable",
    });
    const u = parseDatabaseUrl("postgres://u:p@127.0.0.1/d?connect_timeout=3&application_name=desk-b&channel_binding=require&sslmode=require");
    expect({ c: u.connectTimeoutS, a: u.applicationName, b: u.channelBinding, m: u.sslmode }).toEqual({ c: 3, a: "desk-b", b: "require", m: "require" });
  });

  test("without sslmode: TLS off on this machine only", () => {
    for (const host of ["127.0.0.1", "127.9.9.9", "localhost", "[::1]"]) expect(parseDatabaseUrl(`postgres://u:p@${host}/d`).sslmode).toBe("disable");
    for (const host of ["db.internal", "10.0.0.5", "[2001:db8::1]", "128.0.0.1"])
      expect(refusal(`postgres://u:s3cret@${host}/d`)).toContain("names no sslmode");
  });

  test("modes that fall back to the clear are refused, as are unknown ones", () => {
    expect(refusal("postgres://u:s3cret@h/d?sslmode=prefer")).toContain("falls back to a connection in the clear");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=allow")).toContain("falls back to a connection in the clear");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=on")).toContain("not a TLS mode");
  });

  test("sslrootcert goes with verify-ca or verify-full and with nothing else", () => {
    expect(refusal("postgres://u:s3cret@h/d?sslmode=verify-full")).toContain("needs sslrootcert");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=verify-ca&sslrootcert=")).toContain("needs sslrootcert");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&sslrootcert=/ca.pem")).toContain("checks no certificate");
    expect(refusal("postgres://u:s3cret@127.0.0.1/d?sslmode=disable&sslrootcert=/ca.pem")).toContain("checks no certificate");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=verify-ca&sslrootcert=system")).toContain("any certificate a public CA signed");
    expect(parseDatabaseUrl("postgres://u@h/d?sslmode=verify-full&sslrootcert=system").sslrootcert).toBe("system");
  });

  test("anything it would not honour is refused, never ignored", () => {
    expect(refusal("mysql://u:s3cret@h/d")).toContain("scheme is mysql");
    expect(refusal("not a url")).toContain("not a URL");
    expect(refusal("postgres://u:s3cret@h1,h2/d?sslmode=require")).toContain("exactly one host");
    expect(refusal("postgres://:s3cret@h/d?sslmode=require")).toContain("names no user");
    expect(refusal("postgres://u:s3cret@h/?sslmode=require")).toContain("one database");
    expect(refusal("postgres://u:s3cret@h/a/b?sslmode=require")).toContain("one database");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&target_session_attrs=read-write")).toContain("does not support: target_session_attrs");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&host=/var/run/postgresql")).toContain("does not support: host");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&sslmode=disable")).toContain("gives sslmode twice");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&connect_timeout=0")).toContain("connect_timeout");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&connect_timeout=2.5")).toContain("connect_timeout");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&channel_binding=maybe")).toContain("channel_binding");
    expect(refusal("postgres://u:s3cret@127.0.0.1/d?channel_binding=require")).toContain("needs TLS");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require&application_name=%0Aevil")).toContain("application_name");
    expect(refusal("postgres://u:s3cret@h/d%ZZ?sslmode=require")).toContain("percent-encoding");
    expect(refusal("postgres://u:s3cret@h/d?sslmode=require#x")).toContain("fragment");
  });

  test("describeTarget names the server and the TLS mode, never the password", () => {
    const line = describeTarget(parseDatabaseUrl("postgres://desk:s3cret@db.internal:6543/ledger?sslmode=verify-full&sslrootcert=/etc/ca.pem"));
    expect(line).toBe("postgres://desk@db.internal:6543/ledger (TLS verify-full, CAs from /etc/ca.pem)");
    expect(describeTarget(parseDatabaseUrl("postgres://desk:s3cret@[::1]/ledger"))).toBe("postgres://desk@[::1]:5432/ledger (TLS off)");
  });

  test("clientOptions leaves nothing for the environment to fill in", () => {
    const o = clientOptions(parseDatabaseUrl("postgres://u:p@127.0.0.1:5/d?sslmode=require"));
    expect(o).toMatchObject({
      hostname: "127.0.0.1",
      port: 5,
      username: "u",
      password: "p",
      database: "d",
      tls: "require",
      connectionTimeout: 10,
      bigint: true,
    });
    expect(o.connection).toMatchObject({ options: "", search_path: "ask_only", application_name: "ask-only desk" });
    expect(clientOptions(parseDatabaseUrl("postgres://u:p@127.0.0.1/d")).tls).toBe(false);
    expect(() => clientOptions(parseDatabaseUrl("postgres://u:p@h/d?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"))).toThrow(
      "cannot read sslrootcert /nonexistent/ca.pem",
    );
    expect(clientOptions(parseDatabaseUrl("postgres://u:p@h/d?sslmode=verify-full&sslrootcert=system")).tls).toEqual({ rejectUnauthorized: true });
  });
});
