// Hand-written usage for each subcommand: what it does, its options, and examples that run.

export const PROGRAM_USAGE = `ask-only: agents ask for money to be spent; people decide.

Usage: ask-only <command> [options]

Commands:
  serve-mcp        MCP server (stdio) for an agent: ask to pay or to open an account
  approver         the person's side: mTLS server plus the console where asks are decided
  desk             spend gate between agents and paid tools (REST and MCP)
  certs DIR        make the two CAs and the certificates of the mTLS link
  verify-receipt   check a desk receipt offline

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
(created with mode 0700 if missing). Existing files are never overwritten. The CA private keys
are discarded: to issue new certificates, run certs again into a new directory.

Options:
  --host NAME   another DNS name or IP address for the approver's certificate (repeatable);
                localhost, 127.0.0.1 and ::1 are always included
  --desk        make the desk's own set instead: a third CA and the desk's client certificate
  -h, --help    print this help

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
  ASK_ONLY_PAY_URL           the approver, e.g. https://localhost:8443
  ASK_ONLY_PAY_CLIENT_CERT   client certificate (client.pem)
  ASK_ONLY_PAY_CLIENT_KEY    client key (client.key)
  ASK_ONLY_PAY_CA            the approver's CA (approver-ca.pem)
  ASK_ONLY_PAY_TIMEOUT_MS    how long one exchange with the approver may take
                             (default 10000)
  ASK_ONLY_PAY_MAX_AMOUNT    the largest amount of one pay ask (default 1000000)

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
and takes "approve ID" or "deny ID" typed here.

Options (each also from the environment; the flag wins):
  --cert PATH          server certificate (ASK_ONLY_PAY_APPROVER_CERT)
  --key PATH           server key (ASK_ONLY_PAY_APPROVER_KEY)
  --ca PATH            the client CA it trusts (ASK_ONLY_PAY_APPROVER_CA)
  --listen HOST:PORT   where to listen (default 127.0.0.1:8443)
                       (ASK_ONLY_PAY_APPROVER_LISTEN)
  --db PATH            the ask ledger (default $XDG_STATE_HOME/ask-only/asks.db,
                       else ~/.local/state/ask-only/asks.db) (ASK_ONLY_PAY_APPROVER_DB)
  --ttl DURATION       how long an ask waits for a decision (default 10m; e.g. 90s, 10m,
                       1h; at most 168h) (ASK_ONLY_PAY_APPROVER_TTL)
  --max-pending N      most asks pending at once (default 50)
  --max-amount AMOUNT  the largest amount of one pay ask, in major units (default 1000000)
                       (ASK_ONLY_PAY_APPROVER_MAX_PENDING)
  --desk-listen HOST:PORT
                       a second listener, for the desk's spend asks only
                       (ASK_ONLY_PAY_APPROVER_DESK_LISTEN)
  --desk-ca PATH       the only CA that listener trusts: desk-ca.pem from certs --desk
                       (ASK_ONLY_PAY_APPROVER_DESK_CA)
  --on-approve CMD     run CMD (with /bin/sh -c) once for each approved pay or account ask,
                       the ask as JSON on its stdin; its first line is the ref
                       (ASK_ONLY_PAY_APPROVER_ON_APPROVE)
  --on-approve-timeout DURATION
                       the step's deadline (default 60s, at most 1h)
                       (ASK_ONLY_PAY_APPROVER_ON_APPROVE_TIMEOUT)
  --print-decision-keys
                       print the JWKS of the decision-signing keys (current and retired)
  --export-decisions   print every signed decision record, one JSON line each
  -h, --help           print this help

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

A spend gate between agents and paid tools: per-agent keys with hard budgets, tool
allowlists, an atomic reservation per call, refunds on upstream failure and signed receipts.
On first start it creates DIR/desk.db, the receipt-signing key and the sealing key (mode 0600)
and prints the signing key's kid. "desk check" verifies the ledger and every receipt chain.

Options:
  --listen HOST:PORT        where to listen (default 127.0.0.1:8787)
  --data DIR                data directory (default ./desk-data)
  --admin-token-file PATH   the operator's bearer token (else ASK_ONLY_DESK_ADMIN_TOKEN;
                            with neither, the first start generates one and prints it once)
  --tls-cert PATH           serve HTTPS with this certificate
  --tls-key PATH            and this key
  --upstream-timeout SECS   how long an upstream call may take (default 30)
  --allowed-host HOST       another Host the MCP endpoint (/mcp) and the sandbox answer to,
                            as NAME (any port) or NAME:PORT; repeatable (loopback names
                            always pass)
  --trust-proxy             take the sandbox caller's address from the rightmost
                            X-Forwarded-For entry (only behind a proxy that sets it)
  --allow-upstream-host ADDRESS
                            a link-local or unspecified address (169.254.0.0/16, fe80::/10,
                            0.0.0.0, ::) an upstream URL may name; refused otherwise;
                            repeatable (ASK_ONLY_DESK_ALLOW_UPSTREAM_HOST, comma-separated)
  -h, --help                print this help

Environment:
  ASK_ONLY_DESK_ADMIN_TOKEN the admin token, at least 32 characters
  ASK_ONLY_DESK_ALLOW_UPSTREAM_HOST
                            --allow-upstream-host values, comma-separated (the flag wins)

Examples:
  ask-only desk --data ./desk-data
  ASK_ONLY_DESK_ADMIN_TOKEN="$(cat admin.token)" ask-only desk --listen 127.0.0.1:8787
  ask-only desk check --data ./desk-data
`;

export const VERIFY_RECEIPT_USAGE = `Usage: ask-only verify-receipt RESPONSE.json --keys JWKS.json [--args ARGS.json] [--approver-keys JWKS.json]
       ask-only verify-receipt DECISION.json --keys APPROVER-JWKS.json
       ask-only verify-receipt --jsonl EXPORT.jsonl --keys JWKS.json [--approver-keys JWKS.json]

Checks a desk receipt offline: the signature under its kid, the readable copy against the
signed payload, the returned result against result_sha256, and the arguments (when given)
against params_sha256. RESPONSE.json is a desk REST response body, a saved MCP tools/call
result (receipt under _meta["io.ask-only/receipt"]) or a bare envelope. A receipt of a call
a person approved carries the approver's signed decision: --approver-keys checks it, and that
it approves this very call. An approver's decision record (from GET /v1/asks/ID/decision or
approver --export-decisions) is checked with the approver's key set as --keys. Each check
prints as "ok", "skip" or "FAILED" with the field that differs. Exit 0 only when every check
that applies passes, 1 otherwise, 2 for bad usage.

Options:
  --keys PATH           the desk's JWKS (GET /.well-known/receipt-signing-key.json), or the
                        approver's (approver --print-decision-keys) for decision records;
                        retired keys in it still verify older records
  --args PATH           the arguments object the call was made with (JSON)
  --approver-keys PATH  the approver's JWKS, for receipts that carry a decision
  --jsonl PATH          an export of receipt envelopes or of decision records, one per line:
                        checks every signature and readable copy, and the chains
  -h, --help            print this help

Examples:
  ask-only verify-receipt response.json --keys receipt-signing-key.json --args args.json
  ask-only verify-receipt response.json --keys desk-keys.json --approver-keys approver-keys.json
  ask-only verify-receipt --jsonl receipts.jsonl --keys receipt-signing-key.json
  ask-only verify-receipt --jsonl decisions.jsonl --keys approver-keys.json
`;
