// An organization's signed statement for a month or a UTC day (SPEC 8.18): computed by the one
// function the verifier also runs (core/finance/statement.ts) over the org's budget records and
// receipts, read in one transaction, and signed with the receipt key.
import { WireError } from "../errors.ts";
import { computeStatement, parseStatementPeriod, StatementError, type StatementEnvelope } from "../finance/statement.ts";
import type { DeskContext } from "./context.ts";
import { newId } from "./secrets.ts";

/** ORG_UNKNOWN; VALUE_INVALID (period) for a malformed period, one not begun, or a month of a daily budget. */
export async function statement(d: DeskContext, orgId: string, period: string): Promise<StatementEnvelope> {
  if (parseStatementPeriod(period) === null) throw new WireError("VALUE_INVALID", { field: "period" });
  if ((await d.ledger.orgs.get(orgId)) === null) throw new WireError("ORG_UNKNOWN");
  const data = await d.ledger.finance.statementData(orgId, d.now);
  try {
    const fields = computeStatement({
      id: newId("stmt"),
      org_id: orgId,
      period,
      issued_at: new Date(data.issuedAt).toISOString(),
      records: data.records,
      receipts: data.receipts,
    });
    return d.signing.statement(fields);
  } catch (err) {
    if (err instanceof StatementError) throw new WireError("VALUE_INVALID", { field: "period" });
    throw err;
  }
}
