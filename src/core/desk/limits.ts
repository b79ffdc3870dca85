// The desk's fixed limits, each named once (SPEC 8.9 lists them for users).

/**
 * Calls of one key per UTC hour that may fail: a call counts from its reservation (in the hour it
 * was reserved) until it is charged, so failed and still-running calls together never pass it,
 * however many arrive at once or from however many processes.
 */
export const FAILURES_PER_HOUR = 20;

export const DEFAULT_UPSTREAM_TIMEOUT_MS = 30_000;

/** Time the sweep gives a call beyond the upstream timeout before its reservation counts as abandoned. */
export const ABANDON_MARGIN_MS = 10_000;

/** How long the result of a charged call whose agent disconnected is kept, and how many per key. */
export const HELD_RESULT_MS = 60 * 60 * 1000;
export const HELD_RESULTS_PER_KEY = 20;

/**
 * How long after its ask's expiry an approved call may still be repeated; past it, the sweep
 * settles a reservation still awaiting (refunded as the person's decision says, or abandoned).
 */
export const APPROVAL_USE_MS = 5 * 60 * 1000;

/**
 * The deadline of one exchange with the approver. It is the abandon margin, so the sweep can
 * never take a reservation whose spend ask is still on its way.
 */
export const APPROVER_TIMEOUT_MS = ABANDON_MARGIN_MS;
