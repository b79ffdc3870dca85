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
  deskListen?: string;
  deskCa?: string;
  onApprove?: string;
  onApproveTimeout?: string;
  printDecisionKeys?: boolean;
  exportDecisions?: boolean;
};

/** The desk's own listener: spend asks only, from clients of the desk CA only. */
export type DeskListenerConfig = { hostname: string; port: number; ca: string; caLabel: string };

/** The step behind an approval: a command line run with `/bin/sh -c`, and its deadline. */
export type OnApproveConfig = { command: string; timeoutMs: number };

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
  desk?: DeskListenerConfig;
  onApprove?: OnApproveConfig;
};

/** What `ask-only approver` does: serve (the default), or print from the ledger and exit. */
export type ApproverMode =
  | { kind: "serve"; config: ApproverConfig }
  | { kind: "print-decision-keys" | "export-decisions"; dbPath: string; dbIsDefault: boolean };

const flag = <N extends (typeof APPROVER_FLAGS)[number]["name"]>(name: N) => flagOf(APPROVER_FLAGS, name);
const TLS_FLAGS = { cert: flag("--cert"), key: flag("--key"), ca: flag("--ca") };
const DEFAULT_LISTEN = flag("--listen").default;
const DEFAULT_TTL = flag("--ttl").default;
const DEFAULT_MAX_PENDING = Number(flag("--max-pending").default);
const DEFAULT_MAX_AMOUNT = flag("--max-amount").default;
const DEFAULT_ON_APPROVE_TIMEOUT = flag("--on-approve-timeout").default;
/** A step that takes longer than this is a stuck step, not a slow payment. */
const MAX_ON_APPROVE_TIMEOUT_MS = 3_600_000;
/** A cap above this is a typo: the console could not show that many asks to a person. */
const MAX_MAX_PENDING = 100_000;

/** `$XDG_STATE_HOME/ask-only/asks.db`, else `~/.local/state/ask-only/asks.db`. */
function defaultDbPath(env: Record<string, string | undefined>): string {
  const state = env.XDG_STATE_HOME?.startsWith("/") ? env.XDG_STATE_HOME : join(env.HOME || homedir(), ".local", "state");
  return join(state, "ask-only", "asks.db");
}

/** The ledger's path from --db, the environment or the default (made absolute against cwd). */
function dbPathOf(flags: ApproverFlags, env: Record<string, string | undefined>, cwd: string): { dbPath: string; dbIsDefault: boolean } {
  const db = settingOf(flag("--db"), flags, env)?.value;
  return db === undefined ? { dbPath: defaultDbPath(env), dbIsDefault: true } : { dbPath: resolve(cwd, db), dbIsDefault: false };
}

/**
 * The mode and its settings. --print-decision-keys and --export-decisions read the ledger named
 * by --db and need nothing else (no certificates): they run beside a serving approver.
 */
export function resolveApproverMode(flags: ApproverFlags, env: Record<string, string | undefined>, cwd: string): ApproverMode {
  if (flags.printDecisionKeys && flags.exportDecisions) {
    throw usageError("--print-decision-keys and --export-decisions are two separate runs", "give one of them");
  }
  if (flags.printDecisionKeys) return { kind: "print-decision-keys", ...dbPathOf(flags, env, cwd) };
  if (flags.exportDecisions) return { kind: "export-decisions", ...dbPathOf(flags, env, cwd) };
  return { kind: "serve", config: resolveApproverConfig(flags, env, cwd) };
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
    ttl: setting("--ttl"),
    maxPending: setting("--max-pending"),
    maxAmount: setting("--max-amount"),
    deskListen: setting("--desk-listen"),
    deskCa: settingOf(flag("--desk-ca"), flags, env),
    onApprove: setting("--on-approve"),
    onApproveTimeout: setting("--on-approve-timeout"),
  };
  const listen = parseListen(f.listen ?? DEFAULT_LISTEN);
  if (!listen) throw usageError(`--listen ${JSON.stringify(f.listen)} is not HOST:PORT`, "e.g. --listen 127.0.0.1:8443");

  const ttlMs = parseDuration(f.ttl ?? DEFAULT_TTL);
  if (ttlMs === undefined)
    throw usageError(`--ttl ${JSON.stringify(f.ttl)} is not a duration`, "a whole number and s, m or h, at most a week: e.g. 90s, 10m, 1h");

  let maxPending = DEFAULT_MAX_PENDING;
  if (f.maxPending !== undefined) {
    maxPending = /^[1-9]\d{0,5}$/.test(f.maxPending) ? Number(f.maxPending) : Number.NaN;
    if (!(maxPending <= MAX_MAX_PENDING)) {
      throw usageError(`--max-pending ${JSON.stringify(f.maxPending)} is not a count`, `a whole number from 1 to ${MAX_MAX_PENDING}`);
    }
  }

  const maxAmount = f.maxAmount ?? DEFAULT_MAX_AMOUNT;
  if (!isValidMaxAmount(maxAmount)) {
    throw usageError(
      `--max-amount ${JSON.stringify(f.maxAmount)} is not an amount`,
      "a plain decimal above 0 with at most 9 digits before the point, e.g. 500 or 2500.00",
    );
  }

  // The desk's listener comes with its own CA, or not at all: one without the other is a typo.
  let desk: DeskListenerConfig | undefined;
  if ((f.deskListen === undefined) !== (f.deskCa === undefined)) {
    throw usageError(
      f.deskListen === undefined ? "--desk-ca needs --desk-listen" : "--desk-listen needs --desk-ca",
      "the desk's listener trusts only the desk CA: give --desk-listen HOST:PORT and --desk-ca desk-ca.pem together",
    );
  }
  if (f.deskListen !== undefined && f.deskCa !== undefined) {
    const deskListen = parseListen(f.deskListen);
    if (!deskListen) throw usageError(`--desk-listen ${JSON.stringify(f.deskListen)} is not HOST:PORT`, "e.g. --desk-listen 127.0.0.1:8444");
    if (deskListen.port !== 0 && deskListen.port === listen.port && deskListen.hostname === listen.hostname) {
      throw usageError("--desk-listen is the same address as --listen", "the desk gets a listener of its own: choose another port");
    }
    desk = { ...deskListen, ca: f.deskCa.value, caLabel: f.deskCa.from };
  }

  let onApprove: OnApproveConfig | undefined;
  if (f.onApproveTimeout !== undefined && f.onApprove === undefined) {
    throw usageError("--on-approve-timeout needs --on-approve", "give the step to run with --on-approve CMD");
  }
  if (f.onApprove !== undefined) {
    if (f.onApprove.trim() === "") throw usageError("--on-approve is not a command", "e.g. --on-approve /usr/local/bin/pay-step");
    const timeoutMs = parseDuration(f.onApproveTimeout ?? DEFAULT_ON_APPROVE_TIMEOUT);
    if (timeoutMs === undefined || timeoutMs > MAX_ON_APPROVE_TIMEOUT_MS) {
      throw usageError(
        `--on-approve-timeout ${JSON.stringify(f.onApproveTimeout)} is not a duration`,
        "a whole number and s, m or h, at most 1h: e.g. 30s, 2m",
      );
    }
    onApprove = { command: f.onApprove, timeoutMs };
  }

  return { tls, labels, ...listen, ...dbPathOf(flags, env, cwd), ttlMs, maxPending, maxAmount, ...(desk ? { desk } : {}), ...(onApprove ? { onApprove } : {}) };
}
