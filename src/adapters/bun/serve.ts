// The one hardened Bun.serve set-up, for the approver and the desk: whatever a face answers, the
// server around it never shows a stack trace, never shares its port with another process, and
// answers an uncaught fault with `{"error":"INTERNAL"}` only.
import type { Server } from "bun";
import { errorResponse } from "../../core/errors.ts";

export type ServeOptions = {
  hostname: string;
  port: number;
  fetch: (req: Request, server: Server<undefined>) => Response | Promise<Response>;
  tls?: { cert: string; key: string; ca?: string; requestCert?: boolean; rejectUnauthorized?: boolean };
  /** Bun routes served before `fetch` (the desk's console). */
  routes?: Record<string, (req: Request & { params: Record<string, string> }) => Response | Promise<Response>>;
  /** Seconds a connection may stay silent (Bun's default when absent); 0 turns the limit off. */
  idleTimeout?: number;
};

export function serveHardened(options: ServeOptions): Server<undefined> {
  return Bun.serve({
    hostname: options.hostname,
    port: options.port,
    fetch: options.fetch,
    ...(options.routes ? { routes: options.routes } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.idleTimeout === undefined ? {} : { idleTimeout: options.idleTimeout }),
    // Never development mode (the default when NODE_ENV is not "production", and a compiled
    // binary reports "development"): it answers an uncaught error with its stack trace, which
    // names files and may quote agent input.
    development: false,
    // Explicit: outside development mode Bun turns SO_REUSEPORT on, and a second process on the
    // same port would silently take a share of the requests instead of failing to start.
    reusePort: false,
    error: () => errorResponse("INTERNAL"),
  });
}
