// serve-mcp's settings, from the environment only (an MCP client starts it with `-e` values).
import { envSettingOf, SERVE_MCP_ENV } from "../../cli/flags.ts";
import { failure } from "../../cli/voice.ts";
import { isValidMaxAmount } from "../../core/money/amount.ts";
import type { TlsPaths, TlsRole } from "../../core/tls/load.ts";

export type ServeMcpConfig = {
  url: URL;
  tls: TlsPaths;
  labels: Record<TlsRole, string>;
  timeoutMs: number;
  /** The largest amount of one pay ask (major units): larger asks never leave this process. */
  maxAmount: string;
};

const ENV: Record<TlsRole, string> = {
  cert: "ASK_ONLY_PAY_CLIENT_CERT",
  key: "ASK_ONLY_PAY_CLIENT_KEY",
  ca: "ASK_ONLY_PAY_CA",
};

const DEFAULT_TIMEOUT_MS = Number(envSettingOf(SERVE_MCP_ENV, "ASK_ONLY_PAY_TIMEOUT_MS").default);
const DEFAULT_MAX_AMOUNT = envSettingOf(SERVE_MCP_ENV, "ASK_ONLY_PAY_MAX_AMOUNT").default;
const MAX_TIMEOUT_MS = 120_000;

const EXAMPLE =
  "e.g. ASK_ONLY_PAY_URL=https://localhost:8443 ASK_ONLY_PAY_CLIENT_CERT=certs/client.pem ASK_ONLY_PAY_CLIENT_KEY=certs/client.key ASK_ONLY_PAY_CA=certs/approver-ca.pem";

export function resolveServeMcpConfig(env: Record<string, string | undefined>): ServeMcpConfig {
  const rawUrl = env.ASK_ONLY_PAY_URL;
  if (!rawUrl) throw failure("ASK_ONLY_PAY_URL is not set", EXAMPLE);
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw failure("ASK_ONLY_PAY_URL is not a URL", "e.g. ASK_ONLY_PAY_URL=https://localhost:8443");
  }
  // https only: the link is mutual TLS or nothing. No credentials, query or fragment, which
  // have no meaning here and would only end up in places they should not.
  if (url.protocol !== "https:" || url.username || url.password || url.search || url.hash) {
    throw failure("ASK_ONLY_PAY_URL must be an https URL without credentials, query or fragment", "e.g. ASK_ONLY_PAY_URL=https://localhost:8443");
  }
  if (!url.pathname.endsWith("/")) url.pathname += "/";

  const tls = {} as TlsPaths;
  for (const role of ["cert", "key", "ca"] as const) {
    const value = env[ENV[role]];
    if (!value) throw failure(`${ENV[role]} is not set`, EXAMPLE);
    tls[role] = value;
  }

  let timeoutMs = DEFAULT_TIMEOUT_MS;
  const rawTimeout = env.ASK_ONLY_PAY_TIMEOUT_MS;
  if (rawTimeout !== undefined && rawTimeout !== "") {
    timeoutMs = /^[1-9]\d{0,5}$/.test(rawTimeout) ? Number(rawTimeout) : Number.NaN;
    if (!(timeoutMs <= MAX_TIMEOUT_MS)) {
      throw failure(
        "ASK_ONLY_PAY_TIMEOUT_MS is not a number of milliseconds",
        `a whole number from 1 to ${MAX_TIMEOUT_MS}; the default is ${DEFAULT_TIMEOUT_MS}`,
      );
    }
  }
  const maxAmount = env.ASK_ONLY_PAY_MAX_AMOUNT || DEFAULT_MAX_AMOUNT;
  if (!isValidMaxAmount(maxAmount)) {
    throw failure(
      "ASK_ONLY_PAY_MAX_AMOUNT is not an amount",
      "a plain decimal above 0 with at most 9 digits before the point, e.g. 500; keep it equal to the approver's --max-amount",
    );
  }
  return { url, tls, labels: { ...ENV }, timeoutMs, maxAmount };
}
