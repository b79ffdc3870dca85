// The ledger contracts (test/helpers/ledger-contract.ts, and the upstreams' and approvals' in
// test/helpers/upstream-ledger-contract.ts and approval-ledger-contract.ts) on the PostgreSQL adapter, each test on a fresh
// database of one embedded server, opened as a desk node holding its lease.
import { parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { describeApprovalLedgerContract } from "../helpers/approval-ledger-contract.ts";
import { ledgerContract } from "../helpers/ledger-contract.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { describeUpstreamLedgerContract } from "../helpers/upstream-ledger-contract.ts";

const pg = usePostgres();

async function open() {
  const { url } = await pg.server.createDatabase();
  const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: 8 } });
  return { ledger, close: () => ledger.close() };
}

ledgerContract("PostgreSQL", open);
describeUpstreamLedgerContract("PostgreSQL", open);
describeApprovalLedgerContract("PostgreSQL", open);
