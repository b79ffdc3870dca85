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
  const changes: Record<string, string | null> = {};
  for (const field of Object.keys(await store.load())) changes[field] = null;
  Object.assign(changes, await sealCredential(key, upstream, config));
  await store.save(changes);
}

/** Every secret of `config`, sealed for `upstream` under its field's name. */
export async function sealCredential(key: SealingKey, upstream: string, config: AuthConfig): Promise<Record<string, string>> {
  const sealed: Record<string, string> = {};
  for (const [field, value] of Object.entries(secretsOf(config))) sealed[field] = await sealField(key, upstream, field, value);
  return sealed;
}

/**
 * The store of a credential whose upstream is not stored yet (its registration is still
 * listing the tools, which may already get a token): fields live in memory until `attach` hands
 * them to the ledger's store, where the upstream's row now exists, and every later save goes.
 */
export class StagedCredentialStore implements CredentialStore {
  private fields: Record<string, string>;
  private target: CredentialStore | null = null;
  private changed = 0;

  constructor(initial: Readonly<Record<string, string>>) {
    this.fields = { ...initial };
  }

  /** The fields now, and a mark to give `attach` (what changed after it is saved again there). */
  snapshot(): { fields: Record<string, string>; mark: number } {
    return { fields: { ...this.fields }, mark: this.changed };
  }

  /** From now on every save goes to `target`; fields changed since `mark` are saved there first. */
  async attach(target: CredentialStore, mark: number): Promise<void> {
    if (this.changed !== mark) {
      const stored = await target.load();
      const changes: Record<string, string | null> = { ...this.fields };
      for (const field of Object.keys(stored)) if (!Object.hasOwn(this.fields, field)) changes[field] = null;
      await target.save(changes);
    }
    this.target = target;
  }

  async load(): Promise<Record<string, string>> {
    return this.target === null ? { ...this.fields } : this.target.load();
  }

  async save(changes: Record<string, string | null>): Promise<void> {
    if (this.target !== null) await this.target.save(changes);
    const next = { ...this.fields };
    for (const [field, value] of Object.entries(changes)) {
      if (value === null) delete next[field];
      else next[field] = value;
    }
    this.fields = next;
    this.changed++;
  }
}
