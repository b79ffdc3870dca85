// The operator API's answers as they cross the wire (SPEC 8.6), declared once: the admin face
// builds them (commands/desk/admin.ts) and the console reads them (web/console), so the two
// cannot drift apart. Types only; times are RFC 3339 UTC, money integer millicents.
import type { PlainOutcome, ReceiptOutcome } from "./outcomes.ts";
import type { AuthSettings } from "../upstream/auth-config.ts";
import type { Reset } from "./period.ts";

export type OrgView = { org_id: string; name: string; created_at: string };

export type CreatedOrgView = { org_id: string; name: string };

/** An org budget in its current period; `budget_mc` and `remaining_mc` null are unlimited. */
export type OrgBudgetView = { budget_mc: number | null; reset: "none" | "daily" | "monthly"; period: string; spent_mc: number; remaining_mc: number | null };

/** A budget alert and its delivery state (SPEC 8.17); `event` is the body every attempt sends. */
export type AlertView = {
  alert_id: string;
  scope: "key" | "org";
  org_id: string;
  key_id: string;
  period: string;
  threshold_pct: number;
  budget_mc: number;
  created_at: string;
  state: "pending" | "delivered" | "given_up";
  attempts: number;
  last_error: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
  gave_up_at: string | null;
  event: unknown;
};

/** One org with its budget (null: it never had one, so unlimited). */
export type OrgDetailView = OrgView & { budget: OrgBudgetView | null; alert_thresholds: readonly number[] };

export type KeyView = {
  key_id: string;
  org_id: string;
  name: string;
  budget_mc: number;
  spent_mc: number;
  remaining_mc: number;
  reset: Reset;
  period: string;
  allow: readonly string[];
  prices: Readonly<Record<string, number>>;
  expires_at: string | null;
  revoked_at: string | null;
  created_at: string;
  alert_thresholds: readonly number[];
  /** A call priced above this waits for a person on the approver; null: never. */
  approve_above_mc: number | null;
};

/** A key's secret, shown at creation and at rotation only. */
export type KeySecretView = { key_id: string; secret: string };

/**
 * An upstream credential as the operator sees it: its settings (never a secret) and its state:
 * `ok`, or `needs_grant` once the token endpoint refused the grant or the client (`reason` is
 * its OAuth error code), until the operator gives a new one.
 */
export type AuthView = AuthSettings & ({ state: "ok" } | { state: "needs_grant"; reason: string; since: string });

export type UpstreamView = {
  name: string;
  kind: "mcp" | "rest";
  /** An MCP upstream's endpoint, or a REST upstream's base_url. */
  url: string;
  /** A REST upstream's openapi_url; null for a document given inline, and for MCP upstreams. */
  openapi_url: string | null;
  /** The names of a `header` credential's headers (values are sealed and never shown). */
  header_names: readonly string[];
  auth: AuthView | null;
  created_at: string;
  refreshed_at: string;
};

/** An operation of a REST upstream's document that is not a tool, and why. */
export type SkippedView = { operation: string; reason: string };

/** The answer to a registration or a refresh: the tools served now. */
export type RegisteredView = UpstreamView & { tools: readonly string[]; skipped: readonly SkippedView[] };

export type ToolView = {
  name: string;
  upstream: string;
  description: string;
  price_mc: number;
  upstream_cost_mc: number;
  active: boolean;
  input_schema: unknown;
};

export type AuditView = {
  at: string;
  org_id: string;
  key_id: string;
  tool: string;
  outcome: ReceiptOutcome | PlainOutcome;
  http_status: number;
  price_mc: number;
  upstream_cost_mc: number;
  margin_mc: number;
  receipt_id: string | null;
};

export type SandboxView =
  | { enabled: false }
  | { enabled: true; tools: readonly string[]; budget_mc: number; ttl_s: number; keys_per_day: number; updated_at: string };
