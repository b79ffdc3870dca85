// The flags of each command and the environment variables that set them: one table per command,
// from which main.ts builds the parser, usage.ts prints the options of `--help`, and the commands
// look up their settings. A flag's variable and default are written here once, so help, parser
// and lookup cannot drift apart (test/unit/flags.test.ts holds SPEC.md's tables to them too).
import { DEFAULT_MAX_AMOUNT } from "../core/money/amount.ts";

export type Flag = {
  /** As typed: `--max-pending`. */
  readonly name: `--${string}`;
  /** The value's placeholder in help (`N`); absent for a switch. */
  readonly value?: string;
  /** Sets the flag when it is not given (an empty value counts as unset). */
  readonly env?: string;
  /** Shown in help as `default: ...` (the command applies it). */
  readonly default?: string;
  /** Without it (or its variable) the command cannot run. */
  readonly required?: true;
  /** May be given more than once; the values are collected in order. */
  readonly repeatable?: true;
  /** One sentence; help wraps it. */
  readonly help: string;
};

/** A setting that only the environment gives (serve-mcp is started by an MCP client with `-e`). */
export type EnvSetting = {
  readonly env: string;
  readonly default?: string;
  readonly required?: true;
  readonly help: string;
};

export const CERTS_FLAGS = [
  {
    name: "--host",
    value: "NAME",
    repeatable: true,
    help: "another DNS name or IP address for the approver's certificate (repeatable); localhost, 127.0.0.1 and ::1 are always included",
  },
  { name: "--desk", help: "make the desk's own set instead: a third CA (desk-ca.pem) and the desk's client certificate (desk.pem, desk.key)" },
] as const satisfies readonly Flag[];

export const APPROVER_FLAGS = [
  { name: "--cert", value: "PATH", env: "ASK_ONLY_PAY_APPROVER_CERT", required: true, help: "its server certificate (approver.pem)" },
  { name: "--key", value: "PATH", env: "ASK_ONLY_PAY_APPROVER_KEY", required: true, help: "its key (approver.key)" },
  { name: "--ca", value: "PATH", env: "ASK_ONLY_PAY_APPROVER_CA", required: true, help: "the client CA it trusts (client-ca.pem)" },
  {
    name: "--listen",
    value: "HOST:PORT",
    env: "ASK_ONLY_PAY_APPROVER_LISTEN",
    default: "127.0.0.1:8443",
    help: "where to listen; [::1]:8443 for IPv6; port 0 picks a free port",
  },
  {
    name: "--db",
    value: "PATH",
    env: "ASK_ONLY_PAY_APPROVER_DB",
    default: "$XDG_STATE_HOME/ask-only/asks.db, else ~/.local/state/ask-only/asks.db",
    help: "the ask ledger; a missing directory is created with mode 0700",
  },
  {
    name: "--ttl",
    value: "DURATION",
    env: "ASK_ONLY_PAY_APPROVER_TTL",
    default: "10m",
    help: "how long an ask waits for a decision: a whole number and s, m or h (90s, 10m, 1h), at most 168h",
  },
  { name: "--max-pending", value: "N", env: "ASK_ONLY_PAY_APPROVER_MAX_PENDING", default: "50", help: "most asks pending at once, 1 to 100000" },
  {
    name: "--max-amount",
    value: "AMOUNT",
    env: "ASK_ONLY_PAY_APPROVER_MAX_AMOUNT",
    default: DEFAULT_MAX_AMOUNT,
    help: "the largest amount of one pay ask, in major units of its currency",
  },
  {
    name: "--desk-listen",
    value: "HOST:PORT",
    env: "ASK_ONLY_PAY_APPROVER_DESK_LISTEN",
    help: "a second listener, the desk's: spend asks only (with --desk-ca)",
  },
  { name: "--desk-ca", value: "PATH", env: "ASK_ONLY_PAY_APPROVER_DESK_CA", help: "the only CA the desk's listener trusts: desk-ca.pem from certs DIR --desk" },
  {
    name: "--on-approve",
    value: "CMD",
    env: "ASK_ONLY_PAY_APPROVER_ON_APPROVE",
    help: "run /bin/sh -c CMD once for each approved pay or account ask, the ask as JSON on its stdin; exit 0 and a ref on its first line approve, anything else fails the ask",
  },
  {
    name: "--on-approve-timeout",
    value: "DURATION",
    env: "ASK_ONLY_PAY_APPROVER_ON_APPROVE_TIMEOUT",
    default: "60s",
    help: "the step's deadline: a whole number and s, m or h, at most 1h",
  },
  { name: "--print-decision-keys", help: "print the JWKS of the decision-signing keys (current and retired) and exit" },
  { name: "--export-decisions", help: "print every signed decision record, one JSON line each, and exit" },
] as const satisfies readonly Flag[];

export const SERVE_MCP_ENV = [
  { env: "ASK_ONLY_PAY_URL", required: true, help: "the approver, https only, e.g. https://localhost:8443" },
  { env: "ASK_ONLY_PAY_CLIENT_CERT", required: true, help: "its client certificate (client.pem)" },
  { env: "ASK_ONLY_PAY_CLIENT_KEY", required: true, help: "its key (client.key)" },
  { env: "ASK_ONLY_PAY_CA", required: true, help: "the approver's CA (approver-ca.pem)" },
  { env: "ASK_ONLY_PAY_TIMEOUT_MS", default: "10000", help: "how long one exchange with the approver may take, 1 to 120000" },
  { env: "ASK_ONLY_PAY_MAX_AMOUNT", default: DEFAULT_MAX_AMOUNT, help: "the largest amount of one pay ask (keep it equal to the approver's --max-amount)" },
] as const satisfies readonly EnvSetting[];

export const DESK_FLAGS = [
  { name: "--listen", value: "HOST:PORT", default: "127.0.0.1:8787", help: "where to listen; port 0 picks a free port" },
  { name: "--data", value: "DIR", default: "./desk-data", help: "the data directory, created with mode 0700 when missing" },
  {
    name: "--database",
    value: "URL",
    env: "ASK_ONLY_DESK_DATABASE_URL",
    help: "keep the ledger in PostgreSQL (postgres://USER:PASS@HOST:PORT/DB?sslmode=verify-full&sslrootcert=CA.pem), shared by every desk node given it; --data then keeps only this node's files. A URL with a password goes in the variable only (a flag's value is visible to other users)",
  },
  {
    name: "--node-lease",
    value: "SECS",
    default: "10",
    help: "with --database: how long this node's lease holds without renewal, 3 to 120; a node that cannot renew stops taking calls before it runs out, and the other nodes refund its calls in flight after it",
  },
  {
    name: "--admin-token-file",
    value: "PATH",
    help: "the operator's bearer token is this file's text (else ASK_ONLY_DESK_ADMIN_TOKEN; with neither, the first start makes one and prints it once)",
  },
  { name: "--tls-cert", value: "PATH", help: "serve HTTPS with this certificate (with --tls-key)" },
  { name: "--tls-key", value: "PATH", help: "and this key" },
  { name: "--upstream-timeout", value: "SECS", default: "30", help: "how long an upstream call may take, 0 < SECS <= 600" },
  {
    name: "--allowed-host",
    value: "HOST",
    repeatable: true,
    help: "another Host the MCP endpoint (/mcp) and the sandbox answer to, as NAME (any port) or NAME:PORT; repeatable (loopback names always pass)",
  },
  { name: "--trust-proxy", help: "take the sandbox caller's address from the rightmost X-Forwarded-For entry (only behind a proxy that sets it)" },
  {
    name: "--allow-upstream-host",
    value: "ADDRESS",
    env: "ASK_ONLY_DESK_ALLOW_UPSTREAM_HOST",
    repeatable: true,
    help: "a link-local or unspecified address (169.254.0.0/16, fe80::/10, 0.0.0.0, ::) an upstream URL may name, refused otherwise; repeatable (the variable takes a comma-separated list; the flag wins)",
  },
  {
    name: "--alert-webhook",
    value: "URL",
    help: "where budget alerts are delivered (Standard Webhooks, signed v1 and v1a), at least once, with retries; needs --alert-webhook-secret-file",
  },
  {
    name: "--alert-webhook-secret-file",
    value: "PATH",
    help: "the receiver's Standard Webhooks secret (whsec_ + base64 of 24-64 bytes), a private file: the v1 signature's key",
  },
  {
    name: "--stripe-webhook-secret-file",
    value: "PATH",
    help: "the Stripe endpoint's signing secret (whsec_…), a private file: turns on POST /v1/topups/stripe (needs --topup-rate)",
  },
  {
    name: "--topup-rate",
    value: "RATE",
    repeatable: true,
    help: "RATE is CUR=N: what one minor unit of the ISO 4217 currency CUR buys, in millicents (EUR=1000: 1 cent buys 1,000 mc); repeatable, one per currency",
  },
  {
    name: "--approver",
    value: "URL",
    env: "ASK_ONLY_DESK_APPROVER_URL",
    help: "the approver's desk listener (https only): calls above a key's approve_above_mc wait there for a person (with the four flags below)",
  },
  { name: "--approver-cert", value: "PATH", env: "ASK_ONLY_DESK_APPROVER_CERT", help: "the desk's client certificate (desk.pem from certs DIR --desk)" },
  { name: "--approver-key", value: "PATH", env: "ASK_ONLY_DESK_APPROVER_KEY", help: "its key (desk.key)" },
  { name: "--approver-ca", value: "PATH", env: "ASK_ONLY_DESK_APPROVER_CA", help: "the approver's CA (approver-ca.pem)" },
  {
    name: "--approver-keys",
    value: "PATH",
    env: "ASK_ONLY_DESK_APPROVER_KEYS",
    help: "the approver's decision keys (approver --print-decision-keys): the desk acts only on decisions they sign",
  },
] as const satisfies readonly Flag[];

export const DESK_ENV = [
  { env: "ASK_ONLY_DESK_ADMIN_TOKEN", help: "the admin token, at least 32 characters (--admin-token-file wins)" },
  { env: "ASK_ONLY_DESK_CHECK_THREADS", default: "one per core", help: "desk check: how many threads check the receipts, 1 to 999" },
  { env: "ASK_ONLY_DESK_CHECK_PROGRESS_MS", default: "5000", help: "desk check: how often it says on stderr how far it got, 10 to 3600000" },
] as const satisfies readonly EnvSetting[];

export const VERIFY_RECEIPT_FLAGS = [
  {
    name: "--keys",
    value: "PATH",
    required: true,
    help: "the desk's JWKS (GET /.well-known/receipt-signing-key.json), or the approver's for decision records; retired keys in it still verify older ones",
  },
  { name: "--args", value: "PATH", help: "the arguments object the call was made with (JSON)" },
  {
    name: "--jsonl",
    value: "PATH",
    help: "an export of receipt envelopes or of decision records, one per line: checks every signature and readable copy, and the chains (seq and prev_sha256)",
  },
  { name: "--approver-keys", value: "PATH", help: "the approver's JWKS (approver --print-decision-keys), for receipts that carry the person's decision" },
  {
    name: "--receipts",
    value: "PATH",
    help: "with a statement: the org's receipts export (GET /admin/receipts?org_id=), from which every figure is recomputed",
  },
  { name: "--records", value: "PATH", help: "with a statement: budget records you hold (a top-up's answer), one per line; each must be in the statement" },
] as const satisfies readonly Flag[];

/** `--max-pending` → `maxPending`, the key commander gives the flag's value. */
export function flagKey(name: string): string {
  return name.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** The table entry of `name` (a typo is a compile error: the tables are `as const`). */
export function flagOf<T extends readonly Flag[], N extends T[number]["name"]>(table: T, name: N): Extract<T[number], { name: N }> {
  const flag = table.find((f) => f.name === name);
  if (!flag) throw new Error(`no flag ${name}`);
  return flag as Extract<T[number], { name: N }>;
}

/** The entry of the variable `env` in an environment table. */
export function envSettingOf<T extends readonly EnvSetting[], N extends T[number]["env"]>(table: T, env: N): Extract<T[number], { env: N }> {
  const setting = table.find((s) => s.env === env);
  if (!setting) throw new Error(`no variable ${env}`);
  return setting as Extract<T[number], { env: N }>;
}

export type Setting = { value: string; from: string } | undefined;

/**
 * A flag's value and where it came from (`--cert` or its variable's name): the flag wins over
 * its variable, and an empty variable counts as unset.
 */
export function settingOf(flag: Flag, flags: Record<string, unknown>, env: Record<string, string | undefined>): Setting {
  const given = flags[flagKey(flag.name)];
  if (typeof given === "string") return { value: given, from: flag.name };
  const fromEnv = flag.env === undefined ? undefined : env[flag.env];
  return fromEnv === undefined || fromEnv === "" ? undefined : { value: fromEnv, from: flag.env! };
}
