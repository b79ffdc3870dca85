// arktype, loaded the first time a schema is built. Building its keyword scope takes ~90 ms of
// CPU on this machine, more than the rest of a desk's start-up; a plain clearing builds no schema,
// so a module the desk loads at start never imports arktype's values. It builds its schemas
// through `schemas` and reads their answers with `isArkErrors`. The first call that does need one
// (a call that waits for a person, a finance document) pays that once, on the event loop.
// test/unit/start-up-imports.test.ts fails on a static import of arktype from the desk's start.
import type * as Arktype from "arktype";

export type Ark = typeof Arktype;

let loaded: Ark | null = null;

/** arktype itself: loaded once, synchronously, on first use (Bun's require of an ES module). */
export function arktype(): Ark {
  loaded ??= require("arktype") as Ark;
  return loaded;
}

/** Whether arktype was loaded in this process (tests of what a desk's start and a clearing load). */
export const testOnlyArktypeLoaded = (): boolean => loaded !== null;

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
