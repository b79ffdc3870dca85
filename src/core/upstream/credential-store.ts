// Where an upstream's credential secrets live between runs: a small store of sealed fields per
// upstream (the ledger implements it). Every value in it is sealed with AES-256-GCM under the
// desk's sealing key, with the upstream's name *and the field's name* as additional data: a
// blob copied to another upstream, or from one field to another (a refresh token into the
// access-token slot, say), fails to open instead of being sent where it does not belong.
import { type SealingKey, seal, unseal } from "../desk/seal.ts";
import { type AuthConfig, secretsOf } from "./auth-config.ts";

/**
 * The sealed fields of one upstream's credential. Values are sealed blobs; the store never sees
 * a secret. The fields an upstream may hold: `header:<name>`, `query_value`, `token`,
 * `username`, `password`, `client_secret`, `refresh_token`, `access_token` (the cached token and
 * its expiry) and `grant` (the credential's state once its grant was refused).
 */
export interface CredentialStore {
  /** Every field as last saved. */
  load(): Promise<Record<string, string>>;
  /**
   * Sets (a string) or deletes (null) fields, all of them or none, and resolves only once that
   * is durable: a rotated refresh token must survive a crash right after this resolves.
   */
  save(changes: Record<string, string | null>): Promise<void>;
}

/** The additional data of a sealed field: the upstream and the field (`/` is in neither name). */
const aadOf = (upstream: string, field: string) => `${upstream}/${field}`;

export function sealField(key: SealingKey, upstream: string, field: string, value: string): Promise<string> {
  return seal(key, aadOf(upstream, field), value);
}

/** Throws SealedFieldError when the blob was altered, or sealed for another upstream or field. */
export async function openField(key: SealingKey, upstream: string, field: string, sealed: string): Promise<string> {
  try {
    return await unseal(key, aadOf(upstream, field), sealed);
  } catch {
    throw new SealedFieldError(upstream, field);
  }
}

/** Opens every field a store holds. */
export async function openFields(key: SealingKey, upstream: string, sealed: Record<string, string>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [field, blob] of Object.entries(sealed)) out[field] = await openField(key, upstream, field, blob);
  return out;
}

export class SealedFieldError extends Error {
  override name = "SealedFieldError";
  constructor(
    readonly upstream: string,
    readonly field: string,
  ) {
    super(`the sealed credential field ${field} of upstream ${upstream} does not open`);
  }
}

/**
 * Replaces an upstream's credential with `config` in one save: its secrets sealed, every other
 * field (an old token, a refused grant's state) deleted. This is how the operator gives a new
 * grant (`PUT /admin/upstreams/{name}/auth`); the upstream's credential is then opened again.
 */
export async function replaceCredential(store: CredentialStore, key: SealingKey, upstream: string, config: AuthConfig): Promise<void> {
  const secrets = secretsOf(config);
  const changes: Record<string, string | null> = {};
  for (const field of Object.keys(await store.load())) changes[field] = null;
  for (const [field, value] of Object.entries(secrets)) changes[field] = await sealField(key, upstream, field, value);
  await store.save(changes);
}
