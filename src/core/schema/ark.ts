// arktype, loaded the first time a schema is built. Building its keyword scope takes ~90 ms of
// CPU on this machine, more than the rest of a desk's start-up, and no schema is on the clearing
// path: so a module the desk loads at start never imports arktype's values. It builds its schemas
// through `schemas` and reads their answers with `isArkErrors`.
// (test/unit/start-up-imports.test.ts fails on a static import of arktype from the desk's start.)
import type * as Arktype from "arktype";

export type Ark = typeof Arktype;

let loaded: Ark | null = null;

/** arktype itself: loaded once, synchronously, on first use (Bun's require of an ES module). */
export function arktype(): Ark {
  loaded ??= require("arktype") as Ark;
  return loaded;
}

/** A module's schemas, built once when first asked for. */
export function schemas<T>(build: (ark: Ark) => T): () => T {
  let built: T | undefined;
  return () => {
    built ??= build(arktype());
    return built;
  };
}

/** True when a schema answered with its errors rather than the value. */
export function isArkErrors(out: unknown): out is Arktype.ArkErrors {
  return out instanceof arktype().type.errors;
}
