// The operator's credential on every HTTP exchange the MCP SDK's transport makes with an
// upstream (the handshake, calls, the event stream): a fetch wrapper, since the transport takes
// a fetch. The credential may add headers or query pairs only; the request must still go to the
// upstream's own URL. A 401 is retried once when the credential has a fresher one to give (an
// OAuth token renewed); a credential that cannot be had throws CredentialUnavailable, which the
// client reads as the call's outcome.
import type { Credential } from "../../core/upstream/credential.ts";
import type { Fetch } from "../../core/upstream/bounded-fetch.ts";

/** Thrown when the credential moved the request off the upstream's URL (origin or path). */
export class CredentialMovedRequest extends Error {
  override name = "CredentialMovedRequest";
}

export function credentialFetch(credential: Credential, inner: Fetch, timeoutMs: number): Fetch {
  return async (input, init) => {
    const target = new URL(input instanceof URL ? input.href : String(input));
    // The transport's own signal ends with its session; a token renewal must also end with the call.
    const signal = init?.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
    for (let attempt = 0; ; attempt++) {
      const url = new URL(target);
      const headers = new Headers(init?.headers);
      const applied = await credential.apply(url, headers, signal);
      if (url.origin !== target.origin || url.pathname !== target.pathname || url.hash !== "") throw new CredentialMovedRequest();
      const res = await inner(url, { ...init, headers });
      if (res.status === 401 && attempt === 0 && credential.rejected(applied)) {
        await res.body?.cancel().catch(() => {});
        continue;
      }
      return res;
    }
  };
}
