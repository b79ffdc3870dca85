// Every statement the PostgreSQL desk ledger sends, planned by PostgreSQL itself: the twin of
// desk-query-plans.test.ts. The server logs each statement it receives (log_statement = all) while
// the ledger contracts run on it and a desk-shaped workload asks each filter of the audit log and
// the export; then each one is planned on a migrated ledger with sequential scans turned off,
// as the generic plan a prepared statement settles on (EXPLAIN GENERIC_PLAN: whatever its
// parameters). A Seq Scan of a growing table that remains there means no index can serve the
// statement; an index read with no condition, or a range over the index's leading column, reads
// the table past what was asked. Each fails the test unless the statement is one of the few named
// here with the reason its cost is what it was asked for. A statement PostgreSQL cannot plan, or
// of a kind the test does not know, fails it too: none is skipped unseen.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openPool, parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { migrate } from "../../src/adapters/postgres/migrate.ts";
import { POSTGRES_MIGRATIONS } from "../../src/adapters/postgres/schema.ts";
import { generateSigningKey, loadSigner, sha256Hex } from "../../src/core/receipt/index.ts";
import { registerNode, renewLease } from "../../src/adapters/postgres/leases.ts";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { insertAlert } from "../../src/adapters/postgres/org-money.ts";
import { describeAlertOutboxContract } from "../helpers/alert-outbox-contract.ts";
import { describeApprovalLedgerContract } from "../helpers/approval-ledger-contract.ts";
import { financeLedgerContract } from "../helpers/finance-ledger-contract.ts";
import { ledgerContract, receiptsOf } from "../helpers/ledger-contract.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { describeUpstreamLedgerContract } from "../helpers/upstream-ledger-contract.ts";

const GROWING = ["receipts", "audit", "reservations", "spend", "held_results", "alerts"];
/** Partial indexes that hold only what is still open or undelivered, whatever the ledger's size. */
const OPEN_ONLY = ["reservations_open", "reservations_awaiting", "alerts_due", "alerts_leased"];
const WHOLE_ASKED: [RegExp, string][] = [
  [
    /FROM receipts WHERE n > \$1::bigint AND n <= \$2::bigint ORDER BY n LIMIT \$3::integer$/,
    "a page of the whole ledger's export: every row of its range is returned",
  ],
  [/FROM audit ORDER BY id LIMIT \$1::integer$/, "the first page of the whole audit log, in id order: stops at its limit"],
  [
    /^SELECT issued_at, payload FROM receipts WHERE NOT EXISTS \(SELECT 1 FROM audit kept WHERE kept\.receipt_id = receipts\.id OFFSET 0\) ORDER BY n LIMIT \$1::integer$/,
    "the first page of the whole audit log's receipted calls, in n order: stops at its limit",
  ],
  // Known and left, as on SQLite: with a time and no org or key, both read from the oldest row on
  // (an index on the time would cost every call its bytes); an operator's query, never the
  // clearing path's.
  [
    /FROM receipts WHERE issued_at >= \$1::bigint AND n > \$2::bigint AND n <= \$3::bigint ORDER BY n LIMIT \$4::integer$/,
    "the whole ledger's export from a time on",
  ],
  [/FROM audit WHERE at >= \$1::bigint ORDER BY id LIMIT \$2::integer$/, "the whole audit log from a time on"],
  [
    /FROM receipts WHERE issued_at >= \$1::bigint AND NOT EXISTS \(SELECT 1 FROM audit kept WHERE kept\.receipt_id = receipts\.id OFFSET 0\) ORDER BY n LIMIT \$2::integer$/,
    "the whole audit log's receipted calls from a time on",
  ],
  [/FROM alerts ORDER BY created_at DESC, n DESC LIMIT \$1::integer$/, "the newest page of the whole alert log: stops at its limit"],
  // desk check (check.ts) reads the whole ledger: that is what it is asked for (its memory is bounded apart).
  [/^SELECT s\.key_id, s\.period, s\.spent_mc, s\.charged_mc AS counted_charges,/, "desk check: every key period's spend against its receipts"],
  [/^SELECT k\.id, k\.spent_mc, coalesce\(s\.spent_mc, 0\) AS period_spent,/, "desk check: every key's chain head"],
  [/^SELECT s\.org_id, s\.period, s\.spent_mc, s\.charged_mc AS counted_charges,/, "desk check: every org period's spend"],
  [/^DELETE FROM held_results WHERE held_until <= \$1 ::bigint$/, "removes every expired held result: each row it reads, it deletes"],
  [/^SELECT count\(\*\) AS n FROM receipts r WHERE r\.outcome = 'charged' AND NOT EXISTS/, "desk check: charges of keys that are gone"],
  [
    /^SELECT \(SELECT count\(\*\) FROM reservations WHERE state = 'settled'\) \+ \(SELECT coalesce\(sum\(settled\), 0\) FROM settled_pruned\) AS settled,/,
    "desk check: settled reservations (kept and pruned) against receipts",
  ],
  // The prune reads, from the index of prunable rows, the oldest it deletes (at most its limit),
  // and the newest reservation's id (max: one index entry), which it never deletes.
  [/^WITH gone AS \( DELETE FROM reservations WHERE id IN \( SELECT id FROM reservations WHERE state = 'settled'/, "the prune of settled reservations"],
  [
    /^SELECT n, id, org_id, key_id, seq, issued_at, tool, outcome, period, amount_mc, kid, sha256, envelope FROM receipts WHERE n > \$1 ::bigint ORDER BY n LIMIT 1000$/,
    "migration 6's conversion: every receipt, a page at a time",
  ],
  [/FROM receipts (?:WHERE \(key_id, seq\) > \(\$1, \$2\) )?ORDER BY key_id, seq LIMIT \$\d$/, "desk check: every receipt in chain order, a page at a time"],
  [
    /FROM audit a LEFT JOIN receipts r ON r\.id = a\.receipt_id WHERE a\.receipt_id IS NOT NULL AND a\.id > \$1::bigint ORDER BY a\.id LIMIT \$2::integer$/,
    "desk check: every audit row kept beside its receipt, a page at a time",
  ],
];
/**
 * Statements that run against the schema of an older version: migration 6's conversion reads
 * the columns it then drops (and the test's old ledger writes them). They are planned on a
 * database at 5 migrations; each pages by the primary key n.
 */
const OLD_SCHEMA = [/\btool, outcome, period, amount_mc, kid, sha256, envelope\b/];
/** Statements PostgreSQL does not plan: transactions, session settings, and the migrations' DDL. */
const NOT_PLANNED = /^(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET|CREATE|ALTER|DROP|COMMENT|LOCK|CHECKPOINT|DISCARD|DEALLOCATE)\b/i;
const PLANNED = /^(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i;

// Every statement is logged: more than a pipe holds while this process waits, so the log goes to a file.
const pg = usePostgres({
  logToFile: true,
  settings: { log_statement: "all", log_line_prefix: "@@%d@@ ", log_parameter_max_length: "0", log_min_error_statement: "panic" },
});
let logText = "";
let stopWatching = () => {};

beforeAll(() => {
  stopWatching = pg.server.watchLog((chunk) => {
    logText += chunk;
  });
});
afterAll(() => stopWatching());

async function open() {
  const { url } = await pg.server.createDatabase();
  const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: 8 } });
  return { ledger, close: () => ledger.close() };
}

// What the contracts send covers every port method on both ledgers.
ledgerContract("PostgreSQL (statements recorded)", open);
financeLedgerContract("PostgreSQL (statements recorded)", open, async (ledger, statement) => {
  await (ledger as PostgresDeskLedger).testOnlySql().unsafe(statement);
});
describeUpstreamLedgerContract("PostgreSQL (statements recorded)", open);
describeApprovalLedgerContract("PostgreSQL (statements recorded)", open);
describeAlertOutboxContract("PostgreSQL (statements recorded)", async () => {
  const { ledger, close } = await open();
  let serial = 0;
  return {
    outbox: ledger.alerts,
    add: async (id, body, atMs) => {
      await insertAlert(ledger.testOnlySql(), {
        id,
        scope: "org",
        subjectId: "org_c",
        orgId: "org_c",
        keyId: "key_c",
        period: "none",
        thresholdPct: 80,
        budgetMc: ++serial,
        body,
        createdAt: atMs,
      });
    },
    close,
  };
});

/** The statements of the log: `execute NAME: SQL` (extended protocol) or `statement: SQL`, with continuation lines. */
function statementsOf(text: string): Set<string> {
  const out = new Set<string>();
  for (const entry of text.split(/\n(?=@@)/)) {
    const m = /^@@([^@]*)@@ LOG: {2}(?:execute [^:]*|statement): ([\s\S]*)$/.exec(entry);
    if (m === null || m[1] === "postgres" || m[1] === "") continue;
    const sql = m[2]!.replace(/\n\t/g, "\n").trim();
    if (sql !== "") out.add(sql);
  }
  return out;
}

const ADAPTER = join(import.meta.dir, "../../src/adapters/postgres");

/**
 * The fixed text of every statement written in the adapter's source: each template literal that
 * opens with SELECT, INSERT, UPDATE, DELETE or WITH, by its longest part between interpolations.
 * A statement no test sends is one this test never planned.
 */
function sourceStatements(): string[] {
  const out: string[] = [];
  for (const file of readdirSync(ADAPTER).filter((f) => f.endsWith(".ts"))) {
    const text = readFileSync(join(ADAPTER, file), "utf8");
    for (const m of text.matchAll(/`(\s*(?:SELECT|INSERT|UPDATE|DELETE|WITH)\b[^`]*)`/g)) {
      const parts = m[1]!
        .replace(/\$\{[^{}`]*\}/g, "\u0000")
        .split("\u0000")
        // past a `${` left open (a template nested in one), the rest is code
        .map((p) => p.split("${")[0]!.replace(/\s+/g, " ").trim());
      out.push(parts.reduce((a, b) => (b.length > a.length ? b : a), ""));
    }
  }
  return out;
}

type PlanNode = { "Node Type": string; "Relation Name"?: string; "Index Name"?: string; "Index Cond"?: string; Plans?: PlanNode[] };
type IndexInfo = { table: string; leading: string };

function* nodesOf(plan: PlanNode): Generator<PlanNode> {
  yield plan;
  for (const child of plan.Plans ?? []) yield* nodesOf(child);
}

/** Why a plan node reads a growing table past what was asked, or null. */
function unbounded(node: PlanNode, indexes: Map<string, IndexInfo>): string | null {
  if (node["Node Type"] === "Seq Scan") return GROWING.includes(node["Relation Name"]!) ? `Seq Scan on ${node["Relation Name"]}` : null;
  const name = node["Index Name"];
  if (name === undefined) return null;
  const index = indexes.get(name);
  if (index === undefined || !GROWING.includes(index.table) || OPEN_ONLY.includes(name)) return null;
  const cond = node["Index Cond"];
  if (cond === undefined) return `${node["Node Type"]} on ${name} with no condition`;
  // Bounded when the index's leading column is held to one value (or a list of values).
  const equality = new RegExp(`\\(\\(?${index.leading}\\)?(?:::[a-z ]+)?\\)? = `);
  return equality.test(cond) ? null : `${node["Node Type"]} on ${name}: ${cond}`;
}

describe("the statements the PostgreSQL ledger sends", () => {
  test("a desk's reads (the audit log and the export by every filter, a key's receipts, held results) and a node's lease", async () => {
    const { url } = await pg.server.createDatabase();
    const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: 8 } });
    const close = () => ledger.close();
    try {
      const T = Date.parse("2026-03-01T10:00:00Z");
      await ledger.orgs.create({ id: "org_p", name: "p", createdAt: T });
      for (const orgId of [null, "org_p"]) {
        for (const sinceMs of [null, T]) {
          await receiptsOf(ledger, { orgId, sinceMs });
          for (const keyId of [null, "key_p"]) await ledger.records.audit({ orgId, keyId, sinceMs, limit: 10 });
        }
        await ledger.alerts.list({ orgId, limit: 10 });
      }
      await ledger.records.keyReceipts("key_p", T, 10);
      await ledger.alerts.releaseLeases();
      // A node's lease: taken, found held by another process, renewed.
      const sql = ledger.testOnlySql();
      const taken = await registerNode(sql, "node-b", 60_000);
      expect(taken.kind).toBe("registered");
      expect((await registerNode(sql, "node-b", 60_000)).kind).toBe("held");
      if (taken.kind === "registered") expect(await renewLease(sql, taken.lease, 60_000)).toBe(true);
      // desk check opens the ledger without migrating it.
      const checking = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: null, migrate: false, pool: { max: 1 } });
      await checking.close();
      await ledger.records.heldAmong(["rcpt_a", "rcpt_b"], T);
      await ledger.records.heldResult("rcpt_a", T);
    } finally {
      await close();
    }
  });

  test("a ledger of the previous version (5 migrations) with a receipt, converted at start", async () => {
    const { url } = await pg.server.createDatabase();
    const sql = openPool(parseDatabaseUrl(url), { max: 1 });
    try {
      await migrate(sql, POSTGRES_MIGRATIONS.slice(0, 5));
      const env = loadSigner(generateSigningKey().privatePem).sign({
        id: "rcpt_old1",
        issued_at: new Date(Date.parse("2026-03-01T10:00:00Z")).toISOString(),
        org_id: "org_o",
        key_id: "key_o",
        tool: "up__echo",
        outcome: "refused_budget",
        http_status: 402,
        price_mc: 100,
        amount_mc: 0,
        upstream_cost_mc: 0,
        remaining_mc: 0,
        period: "none",
        params_sha256: "a".repeat(64),
        result_sha256: null,
        seq: 1,
        prev_sha256: null,
      });
      await sql.unsafe(
        `INSERT INTO receipts (id, org_id, key_id, seq, issued_at, tool, outcome, period, amount_mc, kid, sha256, envelope)
         VALUES ($1, 'org_o', 'key_o', 1, $2, 'up__echo', 'refused_budget', 'none', 0, $3, $4, $5)`,
        ["rcpt_old1", Date.parse(env.receipt.issued_at), env.kid, sha256Hex(Buffer.from(env.payload, "base64url")), JSON.stringify(env)],
      );
      expect(await migrate(sql)).toEqual({ from: 5, to: POSTGRES_MIGRATIONS.length });
    } finally {
      await sql.close();
    }
  });

  test("each is planned, and none reads a growing table past what it was asked for", async () => {
    pg.server.flushLog();
    const seen = statementsOf(logText);
    const sent = [...seen].map((t) => t.replace(/\s+/g, " "));
    expect(sourceStatements().filter((part) => !sent.some((t) => t.includes(part)))).toEqual([]);
    const { url } = await pg.server.createDatabase();
    const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-plan", pool: { max: 1 } });
    const old = openPool(parseDatabaseUrl((await pg.server.createDatabase()).url), { max: 1 });
    try {
      await migrate(old, POSTGRES_MIGRATIONS.slice(0, 5));
      const sql = ledger.testOnlySql();
      const indexRows = (await sql`
        SELECT i.relname AS name, t.relname AS "table", a.attname AS leading
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
        JOIN pg_namespace s ON s.oid = t.relnamespace JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
        WHERE s.nspname = 'ask_only'`) as { name: string; table: string; leading: string }[];
      const indexes = new Map(indexRows.map((r) => [r.name, { table: r.table, leading: r.leading }]));
      const planned: string[] = [];
      const unplannable: string[] = [];
      const unknownKind: string[] = [];
      const unboundedReads: string[] = [];
      for (const text of seen) {
        if (NOT_PLANNED.test(text)) continue;
        if (!PLANNED.test(text)) {
          unknownKind.push(text);
          continue;
        }
        let plan: PlanNode;
        const on = OLD_SCHEMA.some((re) => re.test(text.replace(/\s+/g, " "))) ? old : sql;
        try {
          plan = await on.begin(async (tx) => {
            await tx`SET LOCAL enable_seqscan = off`;
            const [row] = await tx.unsafe(`EXPLAIN (FORMAT JSON, GENERIC_PLAN) ${text}`);
            const json = row["QUERY PLAN"];
            return (typeof json === "string" ? JSON.parse(json) : json)[0].Plan as PlanNode;
          });
        } catch (err) {
          unplannable.push(`${text}\n  -> ${(err as Error).message}`);
          continue;
        }
        planned.push(text);
        const flat = text.replace(/\s+/g, " ");
        const bad = [...nodesOf(plan)].map((n) => unbounded(n, indexes)).filter((why) => why !== null);
        if (bad.length > 0 && !WHOLE_ASKED.some(([re]) => re.test(flat))) unboundedReads.push(`${flat}\n  -> ${bad.join("; ")}`);
      }
      expect(unknownKind).toEqual([]);
      expect(unplannable).toEqual([]);
      expect(planned.length).toBeGreaterThan(60);
      expect(unboundedReads).toEqual([]);
      // Each exception still names a statement the ledger sends.
      const flats = planned.map((t) => t.replace(/\s+/g, " "));
      expect(WHOLE_ASKED.filter(([re]) => !flats.some((t) => re.test(t))).map(([, why]) => why)).toEqual([]);
      expect(OLD_SCHEMA.filter((re) => !flats.some((t) => re.test(t)))).toEqual([]);
    } finally {
      await old.close();
      await ledger.close();
    }
  }, 60_000);
});
