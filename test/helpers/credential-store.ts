// Credential stores for the tests, standing in for the ledger's: one in memory that keeps every
// save (to look for secrets in what was written), one in a file that survives `kill -9` (each
// save written to a new file, fsynced, renamed over the old one).
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import type { CredentialStore } from "../../src/core/upstream/credential-store.ts";

export class MemoryCredentialStore implements CredentialStore {
  fields: Record<string, string> = {};
  /** Every save, as it was given. */
  readonly saves: Record<string, string | null>[] = [];
  /** When set, the next save throws this (and changes nothing). */
  failNext: Error | null = null;
  /** When set, saves wait for it before they take effect. */
  gate: Promise<void> | null = null;
  private saving: (() => void)[] = [];

  /** Resolves when a save is waiting at the gate. */
  whenSaving(): Promise<void> {
    return new Promise((resolve) => this.saving.push(resolve));
  }

  async load(): Promise<Record<string, string>> {
    return { ...this.fields };
  }

  async save(changes: Record<string, string | null>): Promise<void> {
    if (this.failNext) {
      const err = this.failNext;
      this.failNext = null;
      throw err;
    }
    if (this.gate) {
      for (const w of this.saving.splice(0)) w();
      await this.gate;
    }
    this.saves.push({ ...changes });
    for (const [k, v] of Object.entries(changes)) {
      if (v === null) delete this.fields[k];
      else this.fields[k] = v;
    }
  }

  /** Everything ever written, as one text. */
  written(): string {
    return JSON.stringify(this.saves);
  }
}

export class FileCredentialStore implements CredentialStore {
  constructor(readonly path: string) {}

  async load(): Promise<Record<string, string>> {
    return existsSync(this.path) ? (JSON.parse(readFileSync(this.path, "utf8")) as Record<string, string>) : {};
  }

  async save(changes: Record<string, string | null>): Promise<void> {
    const fields = await this.load();
    for (const [k, v] of Object.entries(changes)) {
      if (v === null) delete fields[k];
      else fields[k] = v;
    }
    const next = `${this.path}.next`;
    const fd = openSync(next, "w", 0o600);
    writeSync(fd, JSON.stringify(fields));
    fsyncSync(fd);
    closeSync(fd);
    renameSync(next, this.path);
    const dir = openSync(dirname(this.path), "r");
    fsyncSync(dir);
    closeSync(dir);
  }
}
