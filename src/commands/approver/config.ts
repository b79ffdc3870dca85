// The approver's settings from flags and the environment (a flag wins), checked before anything
// listens: a bad value stops it with an error and a hint.
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { APPROVER_FLAGS, flagOf, settingOf } from "../../cli/flags.ts";
import { failure, usageError } from "../../cli/voice.ts";
import { parseDuration } from "../../core/duration.ts";
import { parseListen } from "../../core/http/listen.ts";
import { isValidMaxAmount } from "../../core/money/amount.ts";
import type { TlsPaths, TlsRole } from "../../core/tls/load.ts";

export type ApproverFlags = {
  cert?: string;
  key?: string;
  ca?: string;
  listen?: string;
  db?: string;
  ttl?: string;
  maxPending?: string;
  maxAmount?: string;
};

export type ApproverConfig = {
  tls: TlsPaths;
  labels: Record<TlsRole, string>;
  hostname: string;
  port: number;
  dbPath: string;
  /** The default path was used: its directory is created with mode 0700. */
  dbIsDefault: boolean;
  ttlMs: number;
  maxPending: number;
  /** The largest amount of one pay ask, in major units of its currency. */
  maxAmount: string;
};

const flag = <N extends (typeof APPROVER_FLAGS)[number]["name"]>(name: N) => flagOf(APPROVER_FLAGS, name);
const TLS_FLAGS = { cert: flag("--cert"), key: flag("--key"), ca: flag("--ca") };
const DEFAULT_LISTEN = flag("--listen").default;
const DEFAULT_TTL = flag("--ttl").default;
const DEFAULT_MAX_PENDING = Number(flag("--max-pending").default);
const DEFAULT_MAX_AMOUNT = flag("--max-amount").default;
/** A cap above this is a typo: the console could not show that many asks to a person. */
const MAX_MAX_PENDING = 100_000;

/** `$XDG_STATE_HOME/ask-only/asks.db`, else `~/.local/state/ask-only/asks.db`. */
function defaultDbPath(env: Record<string, string | undefined>): string {
  const state = env.XDG_STATE_HOME?.startsWith("/") ? env.XDG_STATE_HOME : join(env.HOME || homedir(), ".local", "state");
  return join(state, "ask-only", "asks.db");
}

export function resolveApproverConfig(flags: ApproverFlags, env: Record<string, string | undefined>, cwd: string): ApproverConfig {
  const tls = {} as TlsPaths;
  const labels = {} as Record<TlsRole, string>;
  for (const role of ["cert", "key", "ca"] as const) {
    const given = settingOf(TLS_FLAGS[role], flags, env);
    if (given === undefined) {
      // Exit 1, as for an unreadable file: the approver cannot run without it.
      throw failure(
        `--${role} is missing`,
        `give --${role} PATH or set ${TLS_FLAGS[role].env}; \`ask-only certs DIR\` makes the files (approver.pem, approver.key, client-ca.pem)`,
      );
    }
    tls[role] = given.value;
    labels[role] = given.from;
  }

  // The other settings also come from the environment; a flag wins.
  const setting = (name: (typeof APPROVER_FLAGS)[number]["name"]) => settingOf(flag(name), flags, env)?.value;
  const f = {
    listen: setting("--listen"),
    db: setting("--db"),
    ttl: setting("--ttl"),
    maxPending: setting("--max-pending"),
    maxAmount: setting("--max-amount"),
  };
  const listen = parseListen(f.listen ?? DEFAULT_LISTEN);
  if (!listen) throw usageError(`--listen ${JSON.stringify(f.listen)} is not HOST:PORT`, "e.g. --listen 127.0.0.1:8443");

  const ttlMs = parseDuration(f.ttl ?? DEFAULT_TTL);
  if (ttlMs === undefined) throw usageError(`--ttl ${JSON.stringify(f.ttl)} is not a duration`, "a whole number and s, m or h, at most a week: e.g. 90s, 10m, 1h");

  let maxPending = DEFAULT_MAX_PENDING;
  if (f.maxPending !== undefined) {
    maxPending = /^[1-9]\d{0,5}$/.test(f.maxPending) ? Number(f.maxPending) : Number.NaN;
    if (!(maxPending <= MAX_MAX_PENDING)) {
      throw usageError(`--max-pending ${JSON.stringify(f.maxPending)} is not a count`, `a whole number from 1 to ${MAX_MAX_PENDING}`);
    }
  }

  const maxAmount = f.maxAmount ?? DEFAULT_MAX_AMOUNT;
  if (!isValidMaxAmount(maxAmount)) {
    throw usageError(`--max-amount ${JSON.stringify(f.maxAmount)} is not an amount`, "a plain decimal above 0 with at most 9 digits before the point, e.g. 500 or 2500.00");
  }

  const dbIsDefault = f.db === undefined;
  const dbPath = dbIsDefault ? defaultDbPath(env) : resolve(cwd, f.db!);
  return { tls, labels, ...listen, dbPath, dbIsDefault, ttlMs, maxPending, maxAmount };
}
