// GET /admin/alerts: the budget alert outbox with each alert's delivery state (SPEC 8.17).
import type { Desk } from "../../core/desk/desk.ts";
import type { AlertRecord } from "../../core/desk/records.ts";
import type { AlertView } from "../../core/desk/wire.ts";
import type { Route } from "../../core/http/routes.ts";
import type { RequestExtra } from "./http.ts";
import { fail } from "./request.ts";

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function alertView(a: AlertRecord): AlertView {
  const state = a.deliveredAt !== null ? "delivered" : a.gaveUpAt !== null ? "given_up" : "pending";
  return {
    alert_id: a.id,
    scope: a.scope,
    org_id: a.orgId,
    key_id: a.keyId,
    period: a.period,
    threshold_pct: a.thresholdPct,
    budget_mc: a.budgetMc,
    created_at: iso(a.createdAt)!,
    state,
    attempts: a.attempts,
    last_error: a.lastError,
    next_attempt_at: state === "pending" ? iso(a.nextAt) : null,
    delivered_at: iso(a.deliveredAt),
    gave_up_at: iso(a.gaveUpAt),
    event: JSON.parse(a.body),
  };
}

export function alertRoutes(desk: Desk): Route<RequestExtra>[] {
  return [
    {
      method: "GET",
      path: "/admin/alerts",
      handle: async (_req, _p, x) => {
        const limitText = x.query.get("limit");
        const limit = limitText === null ? 100 : Number(limitText);
        if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) fail("VALUE_INVALID", { field: "limit" });
        return Response.json((await desk.alerts({ orgId: x.query.get("org_id"), limit })).map(alertView));
      },
    },
  ];
}
