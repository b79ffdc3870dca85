// The one reading of a listening address, `HOST:PORT` or `[IPv6]:PORT`, for the approver and the
// desk alike: a bracketed host must be an IPv6 address, so a typo stops the command at start
// instead of reaching the socket layer.
import { isIP } from "node:net";

export type ListenAddress = { hostname: string; port: number };

/** `HOST:PORT` or `[IPv6]:PORT` (port 0 picks a free port), or undefined for anything else. */
export function parseListen(text: string): ListenAddress | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const hostname = m[1] ?? m[2]!;
  const port = Number(m[3]);
  if (port > 65_535) return undefined;
  if (m[1] !== undefined && isIP(hostname) !== 6) return undefined;
  return { hostname, port };
}

/** The host as a URL writes it: an IPv6 address in brackets. */
export function urlHost(hostname: string): string {
  return hostname.includes(":") ? `[${hostname}]` : hostname;
}
