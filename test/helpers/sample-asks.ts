// The example asks of SPEC.md and the issues, shared by tests, benchmarks and generators so
// that each writes them once.
import type { AccountAsk, PayAsk } from "../../src/core/asks.ts";

/** The fields of the example pay ask as an agent sends them: no id (serve-mcp mints it), no reason. */
export const PAY_FIELDS = {
  merchant: "Example Shop",
  amount: "19.00",
  currency: "EUR",
  card_handle: "card-2",
  checkout_url: "https://shop.example/checkout/123",
} as const;

/** The example pay ask as validated and stored. */
export const SAMPLE_PAY: PayAsk = { kind: "pay", approval_id: "K7Q2M4XZ3A", ...PAY_FIELDS, reason: "renew the domain" };

/** The example account ask as validated and stored. */
export const SAMPLE_ACCOUNT: AccountAsk = {
  kind: "account",
  approval_id: "P3N8W2R6T0",
  provider_url: "https://provider.example/signup",
  identity_handle: "work",
  reason: "newsletter",
};
