// The port through which an upstream client carries the operator's credential: it puts the
// credential on a request bound for the upstream, hears when the upstream refused it, and says
// whether it still works. Static credentials (a header, a query key, bearer, basic) and OAuth
// credentials that renew themselves are adapters of it; the upstream clients never know which.

/** What a credential put on one request, handed back when the upstream answers 401. */
export type Applied = { readonly generation: number };

/** The credential's state as the operator sees it. */
export type CredentialState =
  | { state: "ok" }
  /** The token endpoint refused the grant or the client (`reason` is its OAuth error code); the operator must give a new one. */
  | { state: "needs_grant"; reason: string; since: number };

export interface Credential {
  /**
   * Adds the credential to a request bound for the upstream's own origin: headers, or the query
   * of `url` (nothing else of the URL is touched). May wait for a token renewal, never past
   * `signal`. Throws CredentialUnavailable when no credential can be had.
   */
  apply(url: URL, headers: Headers, signal: AbortSignal): Promise<Applied>;
  /**
   * The upstream answered 401 to a request that carried `applied`. True when a second attempt
   * would carry a fresher credential (the access token it carried is dropped, or was already
   * replaced); false when nothing would change (a static credential).
   */
  rejected(applied: Applied): boolean;
  state(): CredentialState;
}

/** No credential could be put on the request; `kind` is the call's outcome. */
export class CredentialUnavailable extends Error {
  override name = "CredentialUnavailable";
  constructor(
    /** auth_failed: the grant or client was refused; upstream_error / timeout: the token endpoint failed or was slow. */
    readonly kind: "auth_failed" | "upstream_error" | "timeout",
  ) {
    super(`no credential: ${kind}`);
  }
}

/** An upstream without a credential. */
export const NO_CREDENTIAL: Credential = {
  apply: async () => ({ generation: 0 }),
  rejected: () => false,
  state: () => ({ state: "ok" }),
};

/**
 * The credential an upstream client holds for good, while the operator may replace what is
 * behind it (`PUT /admin/upstreams/{name}/auth`): calls in flight finish with the one they
 * started with, the next ones carry the new one, and a 401 to the old one retries with the new.
 */
export class ReplaceableCredential implements Credential {
  private readonly issuedBy = new WeakMap<Applied, Credential>();

  constructor(private current: Credential) {}

  replace(next: Credential): void {
    this.current = next;
  }

  async apply(url: URL, headers: Headers, signal: AbortSignal): Promise<Applied> {
    const credential = this.current;
    const applied = { generation: (await credential.apply(url, headers, signal)).generation };
    this.issuedBy.set(applied, credential);
    return applied;
  }

  rejected(applied: Applied): boolean {
    const credential = this.issuedBy.get(applied);
    if (credential === undefined) return false;
    // Refused after the operator replaced it: the retry carries the new credential.
    if (credential !== this.current) return true;
    return credential.rejected(applied);
  }

  state(): CredentialState {
    return this.current.state();
  }
}
