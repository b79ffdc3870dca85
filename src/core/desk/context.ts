// The parts of one desk that its operations share (desk.ts builds them; each operation module
// takes them): the ledger port, the clock, the log, and the in-memory state built on the ledger.
import type { Catalog } from "./catalog.ts";
import type { ApproverConnection, Clock, DeskLedger, Log } from "./ports.ts";
import type { UpstreamRegistry } from "./registry.ts";
import type { Signing } from "./signing.ts";
import type { UnsettledCalls } from "./unsettled.ts";

export type DeskContext = {
  readonly ledger: DeskLedger;
  readonly now: Clock;
  readonly log: Log;
  readonly upstreamTimeoutMs: number;
  readonly catalog: Catalog;
  readonly registry: UpstreamRegistry;
  readonly signing: Signing;
  /** Told after a commit that wrote budget alerts (the delivery loop looks at once). */
  readonly alertsWritten: () => void;
  /** The approver a call above its key's threshold waits on (--approver), or null. */
  readonly approver: ApproverConnection | null;
  /** Settlements whose outcome the ledger left unknown, resolved once it answers again. */
  readonly unsettled: UnsettledCalls;
};
