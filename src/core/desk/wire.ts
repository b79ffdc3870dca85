// The operator API's answers as they cross the wire (SPEC 8.6), declared once: the admin face
// builds them (commands/desk/admin.ts) and the console reads them (web/console), so the two
// cannot drift apart. Types only; times are RFC 3339 UTC, money integer millicents.
import type { PlainOutcome, ReceiptOutcome } from "./outcomes.ts";
import type { Reset } from "./period.ts";

export type OrgView = { org_id: string; name: string; created_at: string };

export type CreatedOrgView = { org_id: string; name: string };

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
  /** A call priced above this waits for a person on the approver; null: never. */
  approve_above_mc: number | null;
};

/** A key's secret, shown at creation and at rotation only. */
export type KeySecretView = { key_id: string; secret: string };

export type UpstreamView = { name: string; url: string; header_names: readonly string[]; created_at: string; refreshed_at: string };

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
