// The usage of each subcommand: what it does and examples that run, written by hand; its options
// and environment printed from the tables in flags.ts, so help says what the parser and the
// settings lookup do.
import { APPROVER_FLAGS, CERTS_FLAGS, DESK_ENV, DESK_FLAGS, type EnvSetting, type Flag, SERVE_MCP_ENV, VERIFY_RECEIPT_FLAGS } from "./flags.ts";

/** The width of the hand-written prose around the options. */
const WIDTH = 96;

/** `text` cut into lines of at most `width` columns at spaces. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  return [...lines, line];
}

/** Rows of `head` and its text, the text in a column after the widest head. */
function columns(rows: { head: string; lines: string[] }[]): string {
  const at = Math.max(...rows.map((r) => r.head.length)) + 4;
  return rows.flatMap(({ head, lines }) => lines.map((l, i) => `${i === 0 ? `  ${head}`.padEnd(at) : " ".repeat(at)}${l}`.trimEnd())).join("\n");
}

/** A setting's help, then what it says about it: required, its default, its variable. */
function describe(s: { help: string; required?: true; default?: string; env?: string }, width: number): string[] {
  const facts = [
    s.required ? "required" : undefined,
    s.default === undefined ? undefined : `default: ${s.default}`,
    s.env === undefined ? undefined : `env: ${s.env}`,
  ].filter((f) => f !== undefined);
  const joined = facts.join("; ");
  return [...wrap(s.help, width), ...(joined.length <= width ? (facts.length > 0 ? [joined] : []) : facts.flatMap((f) => wrap(f, width)))];
}

function optionsOf(flags: readonly Flag[]): string {
  const rows = [
    ...flags.map((f) => ({ head: f.value === undefined ? f.name : `${f.name} ${f.value}`, setting: f })),
    { head: "-h, --help", setting: { help: "print this help" } },
  ];
  const width = WIDTH - (Math.max(...rows.map((r) => r.head.length)) + 4);
  return columns(rows.map((r) => ({ head: r.head, lines: describe(r.setting, width) })));
}

function environmentOf(settings: readonly EnvSetting[]): string {
  const width = WIDTH - (Math.max(...settings.map((s) => s.env.length)) + 4);
  return columns(settings.map((s) => ({ head: s.env, lines: describe({ ...s, env: undefined }, width) })));
}

export const PROGRAM_USAGE = `ask-only: agents ask for money to be spent; people decide.

Usage: ask-only <command> [options]

Commands:
  serve-mcp        MCP server (stdio) for an agent: ask to pay or to open an account
  approver         the person's side: mTLS server plus the console where asks are decided
  desk             spend gate between agents and paid tools (REST and MCP)
  certs DIR        make the two CAs and the certificates of the mTLS link (--desk: the desk's)
  verify-receipt   check a desk receipt or an approver's decision record offline

Options:
  -V, --version    print the version
  -h, --help       print this help (also: ask-only <command> --help)

Examples:
  ask-only certs ./certs
  ask-only approver --cert certs/approver.pem --key certs/approver.key --ca certs/client-ca.pem
  ask-only desk --data ./desk-data
  ask-only verify-receipt response.json --keys jwks.json
`;

export const CERTS_USAGE = `Usage: ask-only certs DIR [--host NAME]...
       ask-only certs DIR --desk

Makes two separate certificate authorities and the certificates of the mTLS link in DIR
(created with mode 0700 if missing); with --desk, a third CA and the desk's own client
certificate, for the approver's desk listener. Existing files are never overwritten. The CA
private keys are discarded: to issue new certificates, run certs again into a new directory.

Options:
${optionsOf(CERTS_FLAGS)}

Files:
  approver.pem, approver.key, client-ca.pem    go to the approver
  client.pem, client.key, approver-ca.pem      go to serve-mcp
  desk-ca.pem (--desk)                         goes to the approver (--desk-ca)
  desk.pem, desk.key (--desk)                  go to the desk, with approver-ca.pem

Examples:
  ask-only certs ./certs
  ask-only certs /etc/ask-only --host approver.internal --host 10.0.0.5
  ask-only certs ./certs --desk
`;

export const SERVE_MCP_USAGE = `Usage: ask-only serve-mcp

An MCP server on stdio with one tool, "request": an agent may ask to pay or to create an
account, and read the state of its ask. It talks to the approver over mutual TLS.

Environment:
${environmentOf(SERVE_MCP_ENV)}

stdout carries JSON-RPC only; logs go to stderr. It stops when the client closes stdin.

Examples:
  ASK_ONLY_PAY_URL=https://localhost:8443 ASK_ONLY_PAY_CLIENT_CERT=certs/client.pem \\
  ASK_ONLY_PAY_CLIENT_KEY=certs/client.key ASK_ONLY_PAY_CA=certs/approver-ca.pem \\
  ask-only serve-mcp
`;

export const APPROVER_USAGE = `Usage: ask-only approver [options]
       ask-only approver --print-decision-keys [--db PATH]
       ask-only approver --export-decisions [--db PATH]

Accepts asks over mutual TLS only, stores them, shows each one as a recap on this terminal,
and takes "approve ID" or "deny ID" typed here. Every decision is signed with the key it keeps
beside its ledger (decision-signing.key, made on first start).

Options (each also from its environment variable; the flag wins):
${optionsOf(APPROVER_FLAGS)}

Console commands (typed on this terminal; ids in any case):
  list, show ID, approve ID, deny ID, help

Start-up fails (exit 1) on a missing, unreadable or mismatched certificate, key or CA.
Stop with Ctrl-C, SIGTERM, or Ctrl-D on a terminal. When stdin is a pipe that closes, it
keeps serving.

Examples:
  ask-only approver --cert certs/approver.pem --key certs/approver.key --ca certs/client-ca.pem
  ask-only approver --listen 0.0.0.0:8443 --ttl 5m --db /var/lib/ask-only/asks.db
`;

export const DESK_USAGE = `Usage: ask-only desk [options]
       ask-only desk check --data DIR
       ask-only desk check --database URL

A spend gate between agents and paid tools: per-agent keys with hard budgets, tool
allowlists, an atomic reservation per call, refunds on upstream failure and signed receipts.
On first start it creates DIR/desk.db, the receipt-signing key and the sealing key (mode 0600)
and prints the signing key's kid. "desk check" verifies the ledger and every receipt chain.

Options:
${optionsOf(DESK_FLAGS)}

Environment:
${environmentOf(DESK_ENV)}

Examples:
  ask-only desk --data ./desk-data
  ASK_ONLY_DESK_ADMIN_TOKEN="$(cat admin.token)" ask-only desk --listen 127.0.0.1:8787
  ask-only desk check --data ./desk-data
  ASK_ONLY_DESK_DATABASE_URL="postgres://desk:PASS@db:5432/desk?sslmode=verify-full&sslrootcert=ca.pem" ask-only desk --data ./node-a
`;

export const VERIFY_RECEIPT_USAGE = `Usage: ask-only verify-receipt RESPONSE.json --keys JWKS.json [--args ARGS.json] [--approver-keys JWKS.json]
       ask-only verify-receipt DECISION.json --keys APPROVER-JWKS.json
       ask-only verify-receipt --jsonl EXPORT.jsonl --keys JWKS.json [--approver-keys JWKS.json]
       ask-only verify-receipt STATEMENT.json --keys JWKS.json --receipts EXPORT.jsonl [--records RECORDS.jsonl]

Checks a desk receipt offline: the signature under its kid, the readable copy against the
signed payload, the returned result against result_sha256, and the arguments (when given)
against params_sha256. RESPONSE.json is a desk REST response body, a saved MCP tools/call
result (receipt under _meta["io.ask-only/receipt"]) or a bare envelope. A receipt of a call a
person approved carries the approver's signed decision: --approver-keys checks it, and that it
approves this very call. An organization's statement (GET /admin/statements) is checked with
--receipts: its signature, its budget records, and every figure recomputed from the export. An approver's decision record (GET /v1/asks/ID/decision, approver
--export-decisions) is checked with the approver's key set as --keys. Each check prints as
"ok", "skip" or "FAILED" with the field that differs. Exit 0 only when every check that
applies passes, 1 otherwise, 2 for bad usage.

Options:
${optionsOf(VERIFY_RECEIPT_FLAGS)}

Examples:
  ask-only verify-receipt response.json --keys receipt-signing-key.json --args args.json
  ask-only verify-receipt response.json --keys desk-keys.json --approver-keys approver-keys.json
  ask-only verify-receipt --jsonl receipts.jsonl --keys receipt-signing-key.json
  ask-only verify-receipt statement.json --keys receipt-signing-key.json --receipts receipts.jsonl
  ask-only verify-receipt --jsonl decisions.jsonl --keys approver-keys.json
`;
