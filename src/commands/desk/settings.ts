// The desk's settings from its flags and environment (the flag table is cli/flags.ts), each
// checked here: a bad value stops the desk with an error and a hint before anything listens or
// any file is made.
import { readFileSync } from "node:fs";
import { readDecisionKeys } from "../../adapters/approver-link/decision-keys.ts";
import { type DatabaseTarget, DatabaseUrlError, parseDatabaseUrl } from "../../adapters/postgres/connection.ts";
import { DEFAULT_LEASE, type LeaseTiming } from "../../adapters/postgres/node.ts";
import { DESK_ENV, DESK_FLAGS, envSettingOf, flagOf } from "../../cli/flags.ts";
import { failure, type Streams, usageError } from "../../cli/voice.ts";
import { DEFAULT_UPSTREAM_TIMEOUT_MS } from "../../core/desk/limits.ts";
import { parseAlertWebhookUrl } from "../../core/finance/alert-outbox.ts";
import { parseWebhookSecret, WebhookSecretError } from "../../core/finance/standard-webhooks.ts";
import { type StripeWebhookConfig, stripeSecretProblem } from "../../core/finance/stripe-webhook.ts";
import { parseTopupRates, TopupRateError } from "../../core/finance/topup-rates.ts";
import { PrivatePathError, readPrivateFile } from "../../core/private-files.ts";
import { isLinkLocalOrUnspecified } from "../../core/desk/network.ts";
import { type ListenAddress, parseListen } from "../../core/http/listen.ts";
import type { ReceiptKeys } from "../../core/receipt/index.ts";
import { type LoadedTls, loadTlsFiles, TlsLoadError } from "../../core/tls/load.ts";

const ADMIN_TOKEN_ENV = envSettingOf(DESK_ENV, "ASK_ONLY_DESK_ADMIN_TOKEN").env;
const ALLOW_UPSTREAM_HOST_ENV = flagOf(DESK_FLAGS, "--allow-upstream-host").env;
const DEFAULT_LISTEN = flagOf(DESK_FLAGS, "--listen").default;
const DATABASE_ENV = flagOf(DESK_FLAGS, "--database").env;
const MIN_ADMIN_TOKEN_CHARS = 32;

export type DeskFlags = {
  listen?: string;
  data?: string;
  database?: string;
  nodeLease?: string;
  adminTokenFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  upstreamTimeout?: string;
  /** Extra Host values for the MCP endpoint (repeatable --allowed-host). */
  allowedHost?: string[];
  trustProxy?: boolean;
  /** Link-local or unspecified addresses an upstream may have (repeatable --allow-upstream-host). */
  allowUpstreamHost?: string[];
  alertWebhook?: string;
  alertWebhookSecretFile?: string;
  stripeWebhookSecretFile?: string;
  /** CUR=N entries (repeatable --topup-rate). */
  topupRate?: string[];
  approver?: string;
  approverCert?: string;
  approverKey?: string;
  approverCa?: string;
  approverKeys?: string;
};

export type DeskRun = { flags: DeskFlags; env: Record<string, string | undefined>; streams: Streams };

function listenAddress(text: string): ListenAddress {
  const listen = parseListen(text);
  if (listen === undefined) throw usageError(`--listen ${text} is not HOST:PORT`, "e.g. --listen 127.0.0.1:8787");
  return listen;
}

function parseTimeout(text: string | undefined): number {
  if (text === undefined) return DEFAULT_UPSTREAM_TIMEOUT_MS;
  const secs = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || secs <= 0 || secs > 600) {
    throw usageError(`--upstream-timeout ${text} is not a number of seconds between 0 and 600`);
  }
  return Math.round(secs * 1000);
}

/** --allowed-host values: NAME or NAME:PORT, checked here so a typo stops the desk at start. */
function parseAllowedHosts(values: string[] | undefined): string[] {
  return (values ?? []).map((v) => {
    if (!/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(v)) {
      throw usageError(`--allowed-host ${v} is not NAME or NAME:PORT`, "e.g. --allowed-host desk.example.com");
    }
    return v.toLowerCase();
  });
}

/**
 * --allow-upstream-host values (else ASK_ONLY_DESK_ALLOW_UPSTREAM_HOST, comma-separated), each a
 * link-local or unspecified address, as a URL's hostname writes it. Anything else stops the desk
 * at start: a name would read as allowed although names are never resolved.
 */
function parseUpstreamHostAllowance(run: DeskRun): string[] {
  const given = run.flags.allowUpstreamHost ?? [];
  const values =
    given.length > 0
      ? given
      : (run.env[ALLOW_UPSTREAM_HOST_ENV] ?? "")
          .split(",")
          .map((v) => v.trim())
          .filter((v) => v !== "");
  const from = given.length > 0 ? "--allow-upstream-host" : ALLOW_UPSTREAM_HOST_ENV;
  return values.map((v) => {
    const literal = v.includes(":") && !v.startsWith("[") ? `[${v}]` : v;
    const hostname = URL.canParse(`http://${literal}/`) ? new URL(`http://${literal}/`).hostname : null;
    if (hostname === null || !isLinkLocalOrUnspecified(hostname)) {
      throw usageError(`${from} ${v} is not a link-local or unspecified address`, "e.g. --allow-upstream-host 169.254.169.254");
    }
    return hostname;
  });
}

/** The admin token given by file or environment (checked) and where it came from, or null when neither is set. */
function configuredAdminToken(run: DeskRun): { token: string; from: string } | null {
  let token: string | undefined;
  let from: string;
  if (run.flags.adminTokenFile !== undefined) {
    from = run.flags.adminTokenFile;
    try {
      token = readFileSync(from, "utf8").replace(/\r?\n$/, "");
    } catch (err) {
      throw failure(`cannot read the admin token file ${from}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
  } else {
    token = run.env[ADMIN_TOKEN_ENV];
    from = ADMIN_TOKEN_ENV;
    if (token === undefined || token === "") return null;
  }
  // A short token can be guessed online: refuse to start with one.
  if (token.length < MIN_ADMIN_TOKEN_CHARS || !/^[\x21-\x7e]+$/.test(token)) {
    throw failure(
      `the admin token from ${from} is shorter than ${MIN_ADMIN_TOKEN_CHARS} characters or holds spaces or control characters`,
      "generate one with: openssl rand -base64 33",
    );
  }
  return { token, from: run.flags.adminTokenFile !== undefined ? `the file ${from} (--admin-token-file)` : from };
}

function loadTls(flags: DeskFlags): { cert: string; key: string } | undefined {
  if (flags.tlsCert === undefined && flags.tlsKey === undefined) return undefined;
  if (flags.tlsCert === undefined || flags.tlsKey === undefined) throw usageError("--tls-cert and --tls-key go together");
  const read = (p: string) => {
    try {
      return readFileSync(p, "utf8");
    } catch (err) {
      throw failure(`cannot read ${p}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
  };
  return { cert: read(flags.tlsCert), key: read(flags.tlsKey) };
}

/** A secret from a private file, one trailing newline dropped. */
function privateText(path: string): string {
  try {
    return readPrivateFile(path)
      .toString("utf8")
      .replace(/\r?\n$/, "");
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    throw err;
  }
}

/** Where budget alerts go and the receiver's secret, or null without --alert-webhook; one without the other stops the desk. */
function alertSettings(flags: DeskFlags): { url: URL; secret: Uint8Array } | null {
  if (flags.alertWebhook === undefined) {
    if (flags.alertWebhookSecretFile !== undefined) throw usageError("--alert-webhook-secret-file needs --alert-webhook");
    return null;
  }
  const url = parseAlertWebhookUrl(flags.alertWebhook);
  if (url === null) throw usageError(`--alert-webhook ${flags.alertWebhook} is not an http(s) URL without user or password`);
  if (flags.alertWebhookSecretFile === undefined)
    throw usageError("--alert-webhook needs --alert-webhook-secret-file", "the receiver's whsec_ secret, in a file of mode 0600");
  try {
    return { url, secret: parseWebhookSecret(privateText(flags.alertWebhookSecretFile)) };
  } catch (err) {
    if (err instanceof WebhookSecretError) throw failure(`${flags.alertWebhookSecretFile}: ${err.message}`);
    throw err;
  }
}

/**
 * The Stripe webhook's secret (a private file) and the rates it converts at, or null when the
 * secret is not given. A secret without a rate, or a rate without a secret, stops the desk: one
 * would refuse every payment, the other would be a setting that does nothing.
 */
function stripeSettings(flags: DeskFlags): StripeWebhookConfig | null {
  const rates = flags.topupRate ?? [];
  if (flags.stripeWebhookSecretFile === undefined) {
    if (rates.length > 0) throw usageError("--topup-rate needs --stripe-webhook-secret-file");
    return null;
  }
  if (rates.length === 0) throw usageError("--stripe-webhook-secret-file needs at least one --topup-rate", "e.g. --topup-rate EUR=1000");
  const secret = privateText(flags.stripeWebhookSecretFile);
  const problem = stripeSecretProblem(secret);
  if (problem !== null) throw failure(`the Stripe secret in ${flags.stripeWebhookSecretFile}: ${problem}`);
  try {
    return { secret, rates: parseTopupRates(rates) };
  } catch (err) {
    if (err instanceof TopupRateError) throw usageError(err.message, "e.g. --topup-rate EUR=1000");
    throw err;
  }
}

const APPROVER_FLAGS = ["--approver", "--approver-cert", "--approver-key", "--approver-ca", "--approver-keys"] as const;
type ApproverFlag = (typeof APPROVER_FLAGS)[number];
const APPROVER_FIELD: Record<ApproverFlag, keyof DeskFlags> = {
  "--approver": "approver",
  "--approver-cert": "approverCert",
  "--approver-key": "approverKey",
  "--approver-ca": "approverCa",
  "--approver-keys": "approverKeys",
};
const APPROVER_EXAMPLE =
  "e.g. --approver https://localhost:8444 --approver-cert certs/desk.pem --approver-key certs/desk.key --approver-ca certs/approver-ca.pem --approver-keys approver-keys.json";

/** The link to the approver: its URL, the desk's own certificate set (checked) and the pinned decision keys. */
export type ApproverSettings = { url: URL; tls: LoadedTls; keysPath: string; keys: ReceiptKeys };

/**
 * --approver and its four files (each flag, else its variable), all or none. Every file is read
 * and checked here, so a wrong one stops the desk before it serves: the certificate set as
 * serve-mcp checks its own, the decision keys as a JWKS of Ed25519 keys.
 */
function approverSettings(run: DeskRun): ApproverSettings | null {
  const given = {} as Record<ApproverFlag, { value: string; label: string } | undefined>;
  for (const flag of APPROVER_FLAGS) {
    const env = flagOf(DESK_FLAGS, flag).env;
    const fromFlag = run.flags[APPROVER_FIELD[flag]] as string | undefined;
    const value = fromFlag ?? (run.env[env] === "" ? undefined : run.env[env]);
    given[flag] = value === undefined ? undefined : { value, label: fromFlag !== undefined ? flag : env };
  }
  const missing = APPROVER_FLAGS.filter((f) => given[f] === undefined);
  if (missing.length === APPROVER_FLAGS.length) return null;
  if (missing.length > 0)
    throw usageError(`${missing.join(", ")} missing: the approver's link takes all five of ${APPROVER_FLAGS.join(", ")}`, APPROVER_EXAMPLE);
  const urlText = given["--approver"]!.value;
  const url = URL.canParse(urlText) ? new URL(urlText) : null;
  // https only: the link is mutual TLS or nothing.
  if (url === null || url.protocol !== "https:" || url.username || url.password || url.search || url.hash) {
    throw usageError(`${given["--approver"]!.label} ${urlText} is not an https URL without credentials, query or fragment`, APPROVER_EXAMPLE);
  }
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  let tls: LoadedTls;
  try {
    tls = loadTlsFiles(
      { cert: given["--approver-cert"]!.value, key: given["--approver-key"]!.value, ca: given["--approver-ca"]!.value },
      {
        side: "desk",
        labels: { cert: given["--approver-cert"]!.label, key: given["--approver-key"]!.label, ca: given["--approver-ca"]!.label },
        now: new Date(),
        cwd: process.cwd(),
      },
    );
  } catch (err) {
    if (err instanceof TlsLoadError) throw failure(err.message, err.hint);
    throw err;
  }
  const keysPath = given["--approver-keys"]!.value;
  let keys: ReceiptKeys;
  try {
    keys = readDecisionKeys(keysPath);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err instanceof SyntaxError ? "not JSON" : err instanceof Error ? err.message : "unreadable");
    throw failure(
      `${keysPath} (${given["--approver-keys"]!.label}) is not the approver's decision key set: ${why}`,
      "make it with: ask-only approver --print-decision-keys > approver-keys.json",
    );
  }
  if (keys.kids.length === 0)
    throw failure(
      `${keysPath} (${given["--approver-keys"]!.label}) holds no key`,
      "make it with: ask-only approver --print-decision-keys > approver-keys.json",
    );
  return { url, tls, keysPath, keys };
}

/**
 * The PostgreSQL ledger's target from --database, else ASK_ONLY_DESK_DATABASE_URL; null for the
 * SQLite ledger in --data. A URL we refuse stops the desk with its reason (never the password);
 * so does a password in the flag's value.
 */
export function databaseTarget(flags: { database?: string }, env: Record<string, string | undefined>): DatabaseTarget | null {
  const fromFlag = flags.database !== undefined;
  const text = fromFlag ? flags.database! : env[DATABASE_ENV];
  if (text === undefined || text === "") return null;
  let target: DatabaseTarget;
  try {
    target = parseDatabaseUrl(text);
  } catch (err) {
    if (err instanceof DatabaseUrlError) throw usageError(`${fromFlag ? "--database" : DATABASE_ENV}: ${err.message}`, err.hint);
    throw err;
  }
  // A flag's value is in the process list for every local user to read.
  if (fromFlag && target.password !== "") {
    throw usageError("--database holds a password, which every user of this machine can read in the process list", `give the URL in ${DATABASE_ENV} instead`);
  }
  return target;
}

/** --node-lease: seconds, 3 to 120; renewed every fifth of it, a fifth held back for safety (node.ts). */
function parseNodeLease(text: string | undefined): LeaseTiming {
  if (text === undefined) return DEFAULT_LEASE;
  const secs = Number(text);
  if (!/^\d+$/.test(text) || secs < 3 || secs > 120)
    throw usageError(`--node-lease ${text} is not a whole number of seconds from 3 to 120`, "e.g. --node-lease 10");
  const leaseMs = secs * 1000;
  return { leaseMs, renewEveryMs: leaseMs / 5, safetyMs: leaseMs / 5 };
}

export type DeskSettings = {
  /** As given (for messages), and read. */
  listenText: string;
  listen: ListenAddress;
  timeoutMs: number;
  allowedHosts: string[];
  allowUpstreamHosts: string[];
  configured: { token: string; from: string } | null;
  tls: { cert: string; key: string } | undefined;
  /** POST /v1/topups/stripe, when --stripe-webhook-secret-file is given. */
  stripe: StripeWebhookConfig | null;
  /** Budget alert delivery, when --alert-webhook is given. */
  alerts: { url: URL; secret: Uint8Array } | null;
  /** The approver calls above a key's threshold wait on, or null (they are then refused 503). */
  approver: ApproverSettings | null;
  database: DatabaseTarget | null;
  lease: LeaseTiming;
};

/** Every setting of `ask-only desk`, read and checked (usage errors exit 2, unreadable files 1). */
export function deskSettings(run: DeskRun): DeskSettings {
  const listenText = run.flags.listen ?? DEFAULT_LISTEN;
  return {
    listenText,
    listen: listenAddress(listenText),
    timeoutMs: parseTimeout(run.flags.upstreamTimeout),
    allowedHosts: parseAllowedHosts(run.flags.allowedHost),
    allowUpstreamHosts: parseUpstreamHostAllowance(run),
    configured: configuredAdminToken(run),
    tls: loadTls(run.flags),
    stripe: stripeSettings(run.flags),
    alerts: alertSettings(run.flags),
    approver: approverSettings(run),
    database: databaseTarget(run.flags, run.env),
    lease: parseNodeLease(run.flags.nodeLease),
  };
}
