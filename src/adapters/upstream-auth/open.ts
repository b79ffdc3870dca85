// Opens an upstream's credential from its stored settings and its sealed fields: the one entry
// point the desk uses, at start-up, at registration and after the operator replaces a credential.
import type { SealingKey } from "../../core/desk/seal.ts";
import type { AuthSettings } from "../../core/upstream/auth-config.ts";
import { type Credential, NO_CREDENTIAL } from "../../core/upstream/credential.ts";
import { type CredentialStore, openFields } from "../../core/upstream/credential-store.ts";
import { OAuthCredential } from "./oauth.ts";
import { staticCredential } from "./static.ts";

export type OpenCredentialOptions = {
  upstream: string;
  /** The stored settings; null for an upstream without credential. */
  settings: AuthSettings | null;
  store: CredentialStore;
  sealingKey: SealingKey;
  /** The deadline of one token request (the desk's upstream timeout). */
  timeoutMs: number;
  now?: () => number;
  testOnlyAfterTokensSaved?: () => Promise<void>;
};

/** Throws SealedFieldError when a stored field does not open (another sealing key, an altered row). */
export async function openCredential(options: OpenCredentialOptions): Promise<Credential> {
  const { settings } = options;
  if (settings === null) return NO_CREDENTIAL;
  const secrets = await openFields(options.sealingKey, options.upstream, await options.store.load());
  if (settings.type === "oauth2_client_credentials" || settings.type === "oauth2_refresh_token") {
    return new OAuthCredential({ ...options, settings, secrets });
  }
  return staticCredential(settings, secrets);
}
