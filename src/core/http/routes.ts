// One route table per face: `{ method, path, guard?, handle }` entries matched in order by one
// small matcher, for the approver and the desk alike. A path is literal segments, `:name` (one
// segment, not empty) and a last `*name` (the rest, possibly empty or holding `/`); literal
// segments match as sent. A guard runs before anything of the request is decoded (an admin
// token, a Host check); parameters are percent-decoded only after it (unless the route takes
// them raw), and a malformed escape is NOT_FOUND, never a server fault.
import { WireError } from "../errors.ts";

export type Params = Readonly<Record<string, string>>;

export type Route<X> = {
  /** An HTTP method, or "*" for any. */
  method: string;
  path: string;
  /** Answers instead of the handler when it returns a Response. */
  guard?: (req: Request, extra: X) => Response | null | Promise<Response | null>;
  /** Parameters as sent, not percent-decoded (a value that must match exactly, escapes and all). */
  raw?: true;
  handle: (req: Request, params: Params, extra: X) => Response | Promise<Response>;
};

type Segment = { literal: string } | { param: string } | { rest: string };

type Compiled<X> = { route: Route<X>; segments: Segment[] };

function compile(path: string): Segment[] {
  const parts = path.split("/").slice(1);
  return parts.map((p, i): Segment => {
    if (p.startsWith(":")) return { param: p.slice(1) };
    if (p.startsWith("*")) {
      if (i !== parts.length - 1) throw new Error(`route ${path}: * must be the last segment`);
      return { rest: p.slice(1) };
    }
    return { literal: p };
  });
}

/** Raw (still percent-encoded) parameters when `path` matches, else null. */
function match(segments: readonly Segment[], parts: readonly string[]): Record<string, string> | null {
  const params: Record<string, string> = {};
  for (const [i, s] of segments.entries()) {
    if ("rest" in s) {
      params[s.rest] = parts.slice(i).join("/");
      return params;
    }
    const part = parts[i];
    if (part === undefined) return null;
    if ("literal" in s) {
      if (part !== s.literal) return null;
    } else {
      if (part === "") return null;
      params[s.param] = part;
    }
  }
  return parts.length === segments.length ? params : null;
}

/** A path segment decoded; a malformed escape is NOT_FOUND. */
export function decodeSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new WireError("NOT_FOUND");
  }
}

export type Dispatch<X> = (req: Request, path: string, extra: X) => Promise<Response | null>;

/** The table's dispatcher: the first route whose method and path match answers; null when none does. */
export function routeTable<X>(routes: readonly Route<X>[]): Dispatch<X> {
  const compiled: Compiled<X>[] = routes.map((route) => ({ route, segments: compile(route.path) }));
  return async (req, path, extra) => {
    const parts = path.split("/").slice(1);
    for (const { route, segments } of compiled) {
      if (route.method !== "*" && route.method !== req.method) continue;
      const raw = match(segments, parts);
      if (raw === null) continue;
      const refused = route.guard ? await route.guard(req, extra) : null;
      if (refused !== null) return refused;
      const params = route.raw ? raw : Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, decodeSegment(v)]));
      return route.handle(req, params, extra);
    }
    return null;
  };
}

/**
 * The request's path and query, read without the Host header, which any client may fill with
 * something that is no host (`a b`, `[::1`, `x:99999`): parsing the whole URL would throw, and a
 * client's bad header would become a server fault. The fragment is dropped.
 */
export function targetOf(url: string): { path: string; query: URLSearchParams } {
  const rest = url.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, "");
  try {
    const u = new URL(`https://target.invalid${rest.startsWith("/") ? rest : `/${rest}`}`);
    return { path: u.pathname, query: u.searchParams };
  } catch {
    return { path: "", query: new URLSearchParams() };
  }
}

/** targetOf's path alone. */
export function pathOf(url: string): string {
  return targetOf(url).path;
}
