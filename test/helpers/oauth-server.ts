// The authorization server of the credential tests (test/fixtures/oauth-server.mjs) as a Node
// process, and the authorization-code flow driven headless against it to get a refresh token.
import { join } from "node:path";
import * as oauth from "oauth4webapi";
import { collectText } from "./desk-process.ts";

type Client = { id: string; secret: string; redirect?: string };

export type OAuthServer = {
  issuer: string;
  tokenUrl: string;
  clients: { basic: Client; post: Client; refresh: Client & { redirect: string }; resource: Client };
  /** Requests so far to the token and introspection endpoints. */
  stats(): Promise<{ token: number; introspection: number }>;
  /** Revokes every grant issued so far, with its tokens. */
  revokeGrants(): Promise<void>;
  /** A new grant through the authorization-code flow (PKCE), signed in and consented at once: its refresh token. */
  newRefreshToken(): Promise<string>;
  /** Everything the server printed. */
  output(): string;
  stop(): Promise<void>;
} & AsyncDisposable;

const SCRIPT = join(import.meta.dir, "../fixtures/oauth-server.mjs");

export async function startOAuthServer(): Promise<OAuthServer> {
  const proc = Bun.spawn(["node", SCRIPT], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_ENV: "test" } });
  const out = collectText(proc.stdout as ReadableStream<Uint8Array>);
  const err = collectText(proc.stderr as ReadableStream<Uint8Array>);
  const exited = proc.exited.then((code) => {
    throw new Error(`the authorization server exited (${code}): ${err.text()}`);
  });
  const line = await Promise.race([out.until(/^(\{.*\})\n/), exited]);
  const info = JSON.parse(line[1]!) as { issuer: string; clients: OAuthServer["clients"] };
  const as: oauth.AuthorizationServer = { issuer: info.issuer, authorization_endpoint: `${info.issuer}/auth`, token_endpoint: `${info.issuer}/token` };
  const insecure = { [oauth.allowInsecureRequests]: true };
  const stop = async () => {
    exited.catch(() => {});
    proc.kill("SIGKILL");
    await proc.exited;
  };
  return {
    issuer: info.issuer,
    tokenUrl: `${info.issuer}/token`,
    clients: info.clients,
    stats: async () => (await (await fetch(`${info.issuer}/_test/stats`)).json()) as { token: number; introspection: number },
    revokeGrants: async () => {
      const res = await fetch(`${info.issuer}/_test/revoke-grants`, { method: "POST" });
      if (!res.ok) throw new Error(`revoke failed: ${res.status}`);
    },
    newRefreshToken: async () => {
      const rt = info.clients.refresh;
      const verifier = oauth.generateRandomCodeVerifier();
      const start = new URL(as.authorization_endpoint!);
      const params = {
        client_id: rt.id,
        response_type: "code",
        scope: "offline_access",
        prompt: "consent",
        redirect_uri: rt.redirect,
        code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
        code_challenge_method: "S256",
      };
      for (const [k, v] of Object.entries(params)) start.searchParams.set(k, v);
      // Follow the redirects by hand, carrying the provider's cookies, until the client's redirect URI.
      const jar = new Map<string, string>();
      let at = start;
      for (let hop = 0; hop < 10 && !at.href.startsWith(rt.redirect); hop++) {
        const res = await fetch(at, { redirect: "manual", headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") } });
        for (const c of res.headers.getSetCookie()) {
          const pair = c.split(";")[0]!;
          jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
        }
        const location = res.headers.get("location");
        if (location === null) throw new Error(`the authorization flow stopped at ${res.status}`);
        at = new URL(location, at);
      }
      const callback = oauth.validateAuthResponse(as, { client_id: rt.id }, at, oauth.expectNoState);
      const res = await oauth.authorizationCodeGrantRequest(
        as,
        { client_id: rt.id },
        oauth.ClientSecretBasic(rt.secret),
        callback,
        rt.redirect,
        verifier,
        insecure,
      );
      const tokens = await oauth.processAuthorizationCodeResponse(as, { client_id: rt.id }, res);
      if (tokens.refresh_token === undefined) throw new Error("no refresh token was issued");
      return tokens.refresh_token;
    },
    output: () => out.text() + err.text(),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
