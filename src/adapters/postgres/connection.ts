// The PostgreSQL database URL, read by our own rules, and the one way a client is opened on it.
//
// Bun's client reads parts of a connection from the environment even beside a URL: PGDATABASE
// wins over the URL's database, PGOPTIONS reaches the server (a search_path of its choosing),
// PGSSLMODE applies when the URL names no mode, NODE_TLS_REJECT_UNAUTHORIZED=0 turns certificate
// checks off. Two desk nodes given the same URL could then keep two ledgers and spend each
// budget twice. So the URL is parsed here and every setting is passed to Bun explicitly; nothing
// is left for the environment to fill in.
import { SQL } from "bun";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";

/**
 * The TLS modes we honour. `allow` and `prefer` are refused: each falls back to a connection in
 * the clear when TLS fails, and whoever sits on the path can make it fail.
 */
export type SslMode = "disable" | "require" | "verify-ca" | "verify-full";

export type ChannelBinding = "disable" | "prefer" | "require";

export type DatabaseTarget = {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
  sslmode: SslMode;
  /** A PEM file of the CAs to trust, or "system" for the runtime's trust store; null without verification. */
  sslrootcert: string | null;
  channelBinding: ChannelBinding;
  connectTimeoutS: number;
  applicationName: string;
};

/** A database URL we refuse, with what to do instead. Its message never holds the password. */
export class DatabaseUrlError extends Error {
  override name = "DatabaseUrlError";
  constructor(
    message: string,
    readonly hint: string,
  ) {
    super(message);
  }
}

/** The schema every desk table lives in; each connection's search_path is pinned to it. */
export const SCHEMA = "ask_only";

const SSL_MODES: readonly string[] = ["disable", "require", "verify-ca", "verify-full"];
const CHANNEL_BINDINGS: readonly string[] = ["disable", "prefer", "require"];
const PARAMETERS = ["sslmode", "sslrootcert", "channel_binding", "connect_timeout", "application_name"] as const;
const DEFAULT_CONNECT_TIMEOUT_S = 10;
const DEFAULT_APPLICATION_NAME = "ask-only desk";

const MODE_HINT =
  "add sslmode=verify-full&sslrootcert=CA.pem (or sslmode=require to encrypt without checking the server, or sslmode=disable on a network you trust)";

function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1";
}

function decoded(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new DatabaseUrlError(`the database URL's ${what} is not valid percent-encoding`, "encode reserved characters as %XX");
  }
}

/**
 * Reads `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAMS]`. Parameters: `sslmode`
 * (disable, require, verify-ca, verify-full; none means disable on a loopback host and is refused
 * elsewhere), `sslrootcert` (a PEM file, or `system`; required by verify-ca and verify-full,
 * refused otherwise), `channel_binding` (disable, prefer, require; default prefer with TLS),
 * `connect_timeout` (seconds, 1-600; default 10), `application_name`. Any other parameter, a
 * unix socket, several hosts or a missing user or database is refused, never ignored.
 */
export function parseDatabaseUrl(text: string): DatabaseTarget {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new DatabaseUrlError("the database URL is not a URL", "write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE");
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new DatabaseUrlError(
      `the database URL's scheme is ${url.protocol.replace(/:$/, "")}, not postgres`,
      "write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE",
    );
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  if (host === "" || host.includes(",")) {
    throw new DatabaseUrlError("the database URL must name exactly one host", "write one HOST[:PORT]; several hosts and unix sockets are not supported");
  }
  const port = url.port === "" ? 5432 : Number(url.port);
  const user = decoded(url.username, "user");
  if (user === "") throw new DatabaseUrlError("the database URL names no user", "write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE");
  const path = url.pathname.replace(/^\//, "");
  if (path === "" || path.includes("/")) {
    throw new DatabaseUrlError("the database URL must name one database", "write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE");
  }
  const database = decoded(path, "database");
  if (url.hash !== "") throw new DatabaseUrlError("the database URL has a #fragment", "remove it");

  const params = new Map<string, string>();
  for (const [name, value] of url.searchParams) {
    if (!(PARAMETERS as readonly string[]).includes(name)) {
      throw new DatabaseUrlError(`the database URL has a parameter this desk does not support: ${name}`, `supported: ${PARAMETERS.join(", ")}`);
    }
    if (params.has(name)) throw new DatabaseUrlError(`the database URL gives ${name} twice`, "give each parameter once");
    params.set(name, value);
  }

  const mode = params.get("sslmode");
  let sslmode: SslMode;
  if (mode === undefined) {
    if (!isLoopback(host)) throw new DatabaseUrlError(`the database URL names no sslmode for ${host}, which is not this machine`, MODE_HINT);
    sslmode = "disable";
  } else if (mode === "allow" || mode === "prefer") {
    throw new DatabaseUrlError(
      `sslmode=${mode} is refused: it falls back to a connection in the clear when TLS fails, and anyone on the path can make it fail`,
      MODE_HINT,
    );
  } else if (SSL_MODES.includes(mode)) {
    sslmode = mode as SslMode;
  } else {
    throw new DatabaseUrlError(`sslmode=${mode} is not a TLS mode`, "use disable, require, verify-ca or verify-full");
  }

  const rootcert = params.get("sslrootcert") ?? null;
  const verifies = sslmode === "verify-ca" || sslmode === "verify-full";
  if (verifies && (rootcert === null || rootcert === "")) {
    throw new DatabaseUrlError(`sslmode=${sslmode} needs sslrootcert`, "add sslrootcert=/path/to/ca.pem (or sslrootcert=system to trust the system's CAs)");
  }
  if (!verifies && rootcert !== null) {
    // libpq and Bun read sslrootcert with require differently (a CA check, or a full check):
    // say which one is meant.
    throw new DatabaseUrlError(
      `sslrootcert is given with sslmode=${sslmode}, which checks no certificate`,
      "use sslmode=verify-full (or verify-ca) with sslrootcert",
    );
  }
  if (sslmode === "verify-ca" && rootcert === "system") {
    throw new DatabaseUrlError(
      "sslmode=verify-ca with sslrootcert=system would accept any certificate a public CA signed, for any name",
      "use sslmode=verify-full",
    );
  }

  const binding = params.get("channel_binding") ?? (sslmode === "disable" ? "disable" : "prefer");
  if (!CHANNEL_BINDINGS.includes(binding))
    throw new DatabaseUrlError(`channel_binding=${binding} is not a channel binding mode`, "use disable, prefer or require");
  if (binding === "require" && sslmode === "disable") {
    throw new DatabaseUrlError("channel_binding=require needs TLS, and sslmode=disable turns it off", "use sslmode=verify-full (or require) with it");
  }

  const timeoutText = params.get("connect_timeout");
  const connectTimeoutS = timeoutText === undefined ? DEFAULT_CONNECT_TIMEOUT_S : Number(timeoutText);
  if (!/^\d+$/.test(timeoutText ?? "10") || connectTimeoutS < 1 || connectTimeoutS > 600) {
    throw new DatabaseUrlError(`connect_timeout=${timeoutText} is not a whole number of seconds from 1 to 600`, "e.g. connect_timeout=10");
  }

  const applicationName = params.get("application_name") ?? DEFAULT_APPLICATION_NAME;
  if (!/^[\x20-\x7e]{1,63}$/.test(applicationName)) {
    throw new DatabaseUrlError("application_name must be 1-63 printable ASCII characters", "e.g. application_name=desk-a");
  }

  return {
    host,
    port,
    user,
    password: decoded(url.password, "password"),
    database,
    sslmode,
    sslrootcert: rootcert,
    channelBinding: binding as ChannelBinding,
    connectTimeoutS,
    applicationName,
  };
}

/** The target as a log line may show it: no password. */
export function describeTarget(t: DatabaseTarget): string {
  const host = isIP(t.host) === 6 ? `[${t.host}]` : t.host;
  const tls = t.sslmode === "disable" ? "TLS off" : `TLS ${t.sslmode}${t.sslrootcert === null ? "" : `, CAs from ${t.sslrootcert}`}`;
  return `postgres://${encodeURIComponent(t.user)}@${host}:${t.port}/${encodeURIComponent(t.database)} (${tls})`;
}

function tlsOption(t: DatabaseTarget): NonNullable<Bun.SQL.PostgresOrMySQLOptions["tls"]> {
  if (t.sslmode === "disable") return false;
  if (t.sslmode === "require") return "require";
  let ca: string | undefined;
  if (t.sslrootcert !== "system") {
    try {
      ca = readFileSync(t.sslrootcert!, "utf8");
    } catch (err) {
      throw new DatabaseUrlError(
        `cannot read sslrootcert ${t.sslrootcert}: ${(err as NodeJS.ErrnoException).code ?? err}`,
        "name a readable PEM file of the CA certificates",
      );
    }
    if (!ca.includes("-----BEGIN CERTIFICATE-----")) {
      throw new DatabaseUrlError(`sslrootcert ${t.sslrootcert} holds no PEM certificate`, "name a PEM file of the CA certificates");
    }
  }
  return {
    ...(ca === undefined ? {} : { ca }),
    // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 in the environment cannot turn the check off.
    rejectUnauthorized: true,
    // verify-ca: the chain is checked, the name is not.
    ...(t.sslmode === "verify-ca" ? { checkServerIdentity: () => undefined } : {}),
  };
}

export type PoolOptions = {
  /** Connections in the pool (default 10). */
  max?: number;
  /**
   * Server-side limits each session carries (defaults 5 s, 2 s, 10 s): the server ends a slow
   * statement or a lock wait itself, cleanly rolled back, and a client that vanished
   * mid-transaction frees its row locks.
   */
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  idleInTransactionTimeoutMs?: number;
  /** Seconds an idle connection stays open (default 60). */
  idleTimeoutS?: number;
};

/** The options for Bun's client: every connection setting explicit (the header says why). */
export function clientOptions(t: DatabaseTarget, pool: PoolOptions = {}): Bun.SQL.PostgresOrMySQLOptions {
  return {
    adapter: "postgres",
    hostname: t.host,
    port: t.port,
    username: t.user,
    password: t.password,
    database: t.database,
    tls: tlsOption(t),
    channelBinding: t.channelBinding,
    connectionTimeout: t.connectTimeoutS,
    idleTimeout: pool.idleTimeoutS ?? 60,
    max: pool.max ?? 10,
    bigint: true,
    connection: {
      // Replaces PGOPTIONS, which would otherwise reach the server.
      options: "",
      application_name: t.applicationName,
      search_path: SCHEMA,
      statement_timeout: `${pool.statementTimeoutMs ?? 5_000}ms`,
      lock_timeout: `${pool.lockTimeoutMs ?? 2_000}ms`,
      idle_in_transaction_session_timeout: `${pool.idleInTransactionTimeoutMs ?? 10_000}ms`,
      TimeZone: "UTC",
    },
  };
}

/**
 * A pool on the target. The URL Bun is handed holds only host, port and database (so no URL
 * from the environment is read); everything else comes from clientOptions.
 */
export function openPool(t: DatabaseTarget, pool: PoolOptions = {}): SQL {
  const host = isIP(t.host) === 6 ? `[${t.host}]` : t.host;
  return new SQL(`postgres://${host}:${t.port}/${encodeURIComponent(t.database)}`, clientOptions(t, pool));
}
