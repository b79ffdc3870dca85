// The operator API of organization budgets (SPEC 8.16): an org with its budget, setting it,
// top-ups, and the org's signed budget records.
import type { Desk } from "../../core/desk/desk.ts";
import type { OrgBudgetNow } from "../../core/desk/org-budgets.ts";
import { RESETS, type Reset } from "../../core/desk/period.ts";
import type { StoredOrgRecord } from "../../core/desk/records.ts";
import type { OrgBudgetView, OrgDetailView } from "../../core/desk/wire.ts";
import type { Route } from "../../core/http/routes.ts";
import { orgView } from "./admin.ts";
import type { RequestExtra } from "./http.ts";
import { objectBody as body, fail, intIn, onlyFields, optional, required, thresholdList } from "./request.ts";

/** The largest budget: stays an exact integer through JSON and SQLite. */
const MAX_MC = Number.MAX_SAFE_INTEGER;
const budgetValue = (v: unknown) => (v === null ? null : intIn(0, MAX_MC)(v));
const resetValue = (v: unknown) => (RESETS.includes(v as Reset) ? (v as Reset) : undefined);
// Shown to operators and finance and kept in signed records: printable ASCII only.
const referenceValue = (v: unknown) => (typeof v === "string" && /^[\x21-\x7e]{1,200}$/.test(v) ? v : undefined);

export function orgBudgetRoutes(desk: Desk): Route<RequestExtra>[] {
  return [
    { method: "GET", path: "/admin/orgs/:id", handle: async (_req, p) => Response.json(await orgDetail(desk, p.id!)) },
    { method: "PATCH", path: "/admin/orgs/:id", handle: async (req, p) => patchOrg(desk, p.id!, await body(req)) },
    { method: "POST", path: "/admin/orgs/:id/topups", handle: async (req, p) => addTopup(desk, p.id!, await body(req)) },
    { method: "GET", path: "/admin/orgs/:id/records", handle: async (_req, p) => records(desk, p.id!) },
    {
      method: "GET",
      path: "/admin/statements",
      handle: async (_req, _p, x) => {
        const orgId = x.query.get("org_id");
        const period = x.query.get("period");
        if (orgId === null) fail("FIELD_MISSING", { field: "org_id" });
        if (period === null) fail("FIELD_MISSING", { field: "period" });
        return Response.json(await desk.statement(orgId, period), {
          headers: { "content-disposition": `attachment; filename="statement-${orgId}-${period}.json"` },
        });
      },
    },
  ];
}

const budgetView = (b: OrgBudgetNow): OrgBudgetView => ({
  budget_mc: b.budgetMc,
  reset: b.reset,
  period: b.period,
  spent_mc: b.spentMc,
  remaining_mc: b.remainingMc,
});

async function orgDetail(desk: Desk, id: string): Promise<OrgDetailView> {
  const org = await desk.org(id);
  const budget = await desk.orgBudget(id);
  return { ...orgView(org), budget: budget === null ? null : budgetView(budget), alert_thresholds: await desk.orgThresholds(id) };
}

const recordOf = (r: StoredOrgRecord | null) => (r === null ? null : JSON.parse(r.envelope));

async function patchOrg(desk: Desk, id: string, b: Record<string, unknown>): Promise<Response> {
  onlyFields(b, ["budget_mc", "reset", "alert_thresholds"]);
  const budgetMc = optional(b, "budget_mc", budgetValue);
  const reset = optional(b, "reset", resetValue) ?? null;
  const thresholds = optional(b, "alert_thresholds", thresholdList);
  // A reset goes with a budget; a PATCH changes the budget, the thresholds or both.
  if (budgetMc === undefined && (reset !== null || thresholds === undefined)) fail("FIELD_MISSING", { field: "budget_mc" });
  await desk.org(id);
  if (thresholds !== undefined) await desk.setOrgThresholds(id, thresholds);
  const record = budgetMc === undefined ? null : (await desk.setOrgBudget(id, budgetMc, reset)).record;
  return Response.json({ ...(await orgDetail(desk, id)), record: recordOf(record) });
}

async function addTopup(desk: Desk, id: string, b: Record<string, unknown>): Promise<Response> {
  onlyFields(b, ["amount_mc", "reference"]);
  const amountMc = required(b, "amount_mc", intIn(1, MAX_MC));
  const reference = required(b, "reference", referenceValue);
  const { added, record, budget } = await desk.topUp(id, amountMc, reference);
  return Response.json({ added, budget: budgetView(budget), record: recordOf(record) }, { status: added ? 201 : 200 });
}

async function records(desk: Desk, id: string): Promise<Response> {
  const list = await desk.orgRecords(id);
  return new Response(list.map((r) => `${r.envelope}\n`).join(""), { headers: { "content-type": "application/x-ndjson" } });
}
