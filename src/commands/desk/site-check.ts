// DNS rebinding: a web page on evil.example whose name now resolves to the desk's address sends
// its requests with its own Host (and Origin), and the browser lets it read the answers. The
// endpoints a page could use without a secret of its own, /mcp (an agent's key may sit in a
// local client) and POST /v1/sandbox/keys (no auth: a page could drain its visitor's network's
// quota and read the keys), answer only to the names this desk is reached by.

/** What the check needs from Bun.serve's server: the port it really listens on. */
export type ListenInfo = { readonly port?: number | undefined };

export type SiteOptions = {
  /** The --listen hostname; a wildcard (0.0.0.0, ::) adds nothing. */
  listenHostname?: string;
  /** More Host values to accept (`name` or `name:port`), from --allowed-host. */
  allowedHosts?: readonly string[];
};

/** Whether a request's Host and Origin name this desk; build once, call per request. */
export function siteCheck(options: SiteOptions): (req: Request, server: ListenInfo | undefined) => boolean {
  const extra = new Set((options.allowedHosts ?? []).map((h) => h.toLowerCase()));
  return (req, server) => {
    const defaultPort = new URL(req.url).protocol === "https:" ? 443 : 80;
    const allowed = (hostport: string | null) => hostport !== null && hostAllowed(hostport, defaultPort, server?.port, options.listenHostname, extra);
    return allowed(req.headers.get("host")) && originAllowed(req.headers.get("origin"), allowed);
  };
}

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "[::1]"];
const WILDCARDS = new Set(["0.0.0.0", "::", "[::]", ""]);

/**
 * Whether a Host value (`name[:port]`) is one this desk answers to: a loopback name or the
 * --listen hostname on the port it listens on, or an --allowed-host entry (`name` for any port,
 * `name:port` for that port only).
 */
export function hostAllowed(
  hostport: string,
  defaultPort: number,
  port: number | undefined,
  listenHostname: string | undefined,
  extra: ReadonlySet<string>,
): boolean {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/.exec(hostport.toLowerCase());
  if (m === null) return false;
  const name = m[1]!;
  const given = m[2] === undefined ? defaultPort : Number(m[2]);
  if (extra.has(name) || extra.has(`${name}:${given}`)) return true;
  if (port === undefined || given !== port) return false;
  const listen =
    listenHostname === undefined ? undefined : listenHostname.includes(":") && !listenHostname.startsWith("[") ? `[${listenHostname}]` : listenHostname;
  return LOOPBACK_NAMES.includes(name) || (listen !== undefined && !WILDCARDS.has(listen) && listen.toLowerCase() === name);
}

/** No Origin (not a browser) passes; otherwise its host must pass the Host rule. */
function originAllowed(origin: string | null, allowed: (hostport: string) => boolean): boolean {
  if (origin === null) return true;
  if (!URL.canParse(origin)) return false;
  const u = new URL(origin);
  if (u.protocol !== "http:" && u.protocol !== "https:") return false;
  const port = u.port === "" ? (u.protocol === "https:" ? "443" : "80") : u.port;
  return allowed(`${u.hostname}:${port}`);
}
