// The tools the desk serves, in memory: every active tool of the ledger with its schemas compiled
// once, never per call. Whatever changes a tool or a price reloads it here, inside the domain
// operation that made the change, so no face has to remember to; a change made through another
// desk sharing the ledger moves the store's stamp, and `reloadIfChanged` (the desk's timer)
// picks it up.
import { type ArgsCheck, compileArgsSchema, SchemaRefused } from "./args.ts";
import type { CatalogStore, Log } from "./ports.ts";
import type { ToolRecord } from "./records.ts";

export type ToolEntry = ToolRecord & {
  /** The input schema compiled. */
  check: ArgsCheck;
  /** The listed outputSchema compiled, or null when the tool declares none. */
  checkOutput: ArgsCheck | null;
};

/** A tool's listed outputSchema compiled (as input schemas are), or null when it lists none. */
export function compileOutputSchema(listing: Record<string, unknown>): ArgsCheck | null {
  return Object.hasOwn(listing, "outputSchema") ? compileArgsSchema(listing.outputSchema) : null;
}

type Compiled = { entry: ToolEntry; schemaText: string; listingText: string };

export class Catalog {
  private compiled = new Map<string, Compiled>();
  private loadedStamp: number | null = null;

  constructor(
    private readonly store: CatalogStore,
    private readonly log: Log,
  ) {}

  /** Re-reads tools and prices; a schema is compiled again only when its text changed. */
  async reload(): Promise<void> {
    // Read before the tools: a change between the two reads is seen again at the next check.
    const stamp = await this.store.stamp();
    const next = new Map<string, Compiled>();
    for (const record of await this.store.tools()) {
      if (!record.active) continue;
      const previous = this.compiled.get(record.name);
      const schemaText = JSON.stringify(record.inputSchema);
      const listingText = JSON.stringify(record.listing);
      try {
        const check = previous?.schemaText === schemaText ? previous.entry.check : compileArgsSchema(record.inputSchema);
        const checkOutput = previous?.listingText === listingText ? previous.entry.checkOutput : compileOutputSchema(record.listing);
        next.set(record.name, { entry: { ...record, check, checkOutput }, schemaText, listingText });
      } catch (err) {
        // Stored before this desk refused such schemas: the tool is not served (unknown to
        // agents) rather than checked by a rule that could stall the desk.
        if (!(err instanceof SchemaRefused)) throw err;
        this.log(`tool ${record.name}: not served: its schema is refused (${err.message}); refresh its upstream once it changes`);
      }
    }
    this.compiled = next;
    this.loadedStamp = stamp;
  }

  /** Whether the store's stamp moved since the last reload (a change through another desk). */
  async changed(): Promise<boolean> {
    return (await this.store.stamp()) !== this.loadedStamp;
  }

  tool(name: string): ToolEntry | undefined {
    return this.compiled.get(name)?.entry;
  }

  all(): ToolEntry[] {
    return [...this.compiled.values()].map((c) => c.entry);
  }
}
