// The error table and SPEC.md tell one story: every code is documented, and every error table
// in SPEC.md, whatever the order of its columns, gives each code its own HTTP status (a client
// reads the status before the body). The desk's outcomes answer with the table's statuses too.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REFUNDS } from "../../src/core/desk/clearing.ts";
import { statusOf } from "../../src/core/desk/outcomes.ts";
import { ERRORS, isErrorCode } from "../../src/core/errors.ts";
import { isSafeRef } from "../../src/core/ids.ts";

const spec = readFileSync(join(import.meta.dir, "../../SPEC.md"), "utf8");

const cells = (row: string) =>
  row
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split("|")
    .map((c) => c.trim());

type Table = { line: number; header: string[]; rows: { line: number; cells: string[] }[] };

/** Every Markdown table of SPEC.md: its header cells and body rows, with their line numbers. */
function tables(text: string): Table[] {
  const lines = text.split("\n");
  const out: Table[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith("|") || !/^\|[\s:|-]+\|$/.test(lines[i + 1]!.trim())) continue;
    const table: Table = { line: i + 1, header: cells(lines[i]!), rows: [] };
    let j = i + 2;
    for (; j < lines.length && lines[j]!.startsWith("|"); j++) table.rows.push({ line: j + 1, cells: cells(lines[j]!) });
    out.push(table);
    i = j;
  }
  return out;
}

/** The column that names codes (`code`, `body \`error\``) and the one that gives statuses (`status`, `HTTP`). */
const codeColumn = (t: Table) => t.header.findIndex((h) => /^code$|`error`/i.test(h));
const statusColumn = (t: Table) => t.header.findIndex((h) => /^(status|HTTP)$/i.test(h));

/** `BODY_INVALID` in backquotes; a cell may name several (`A`, `B` or `A` / `B`). */
const codesIn = (cell: string) => [...cell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!);
const statusesIn = (cell: string) => [...cell.matchAll(/\b([1-5]\d\d)\b/g)].map((m) => Number(m[1]));

const errorTables = tables(spec).filter((t) => codeColumn(t) !== -1);

describe("SPEC.md's error tables against src/core/errors.ts", () => {
  test("every error code is named in SPEC.md", () => {
    const missing = Object.keys(ERRORS).filter((code) => !spec.includes(`\`${code}\``));
    expect(missing).toEqual([]);
  });

  test("the tables are found, whatever their column order", () => {
    const withStatus = errorTables.filter((t) => statusColumn(t) !== -1);
    // The approver's (| status | code |), the clearing path's (| step | ... | status | body `error` |)
    // and the desk's (| code | HTTP |) at least, and the field tables (| field | rule | code |).
    expect(withStatus.length).toBeGreaterThanOrEqual(3);
    expect(withStatus.some((t) => statusColumn(t) < codeColumn(t))).toBe(true);
    expect(withStatus.some((t) => statusColumn(t) > codeColumn(t))).toBe(true);
    expect(errorTables.length).toBeGreaterThan(withStatus.length);
  });

  test("every code in a code column is a code of the table", () => {
    const unknown = errorTables.flatMap((t) =>
      t.rows.flatMap((r) =>
        codesIn(r.cells[codeColumn(t)] ?? "")
          .filter((c) => !isErrorCode(c))
          .map((c) => `SPEC.md:${r.line} ${c}`),
      ),
    );
    expect(unknown).toEqual([]);
  });

  test("every row gives its codes their own status: one for all, or one each in order", () => {
    const wrong: string[] = [];
    let compared = 0;
    for (const t of errorTables) {
      const sc = statusColumn(t);
      if (sc === -1) continue;
      for (const r of t.rows) {
        const codes = codesIn(r.cells[codeColumn(t)] ?? "").filter(isErrorCode);
        const statuses = statusesIn(r.cells[sc] ?? "");
        if (codes.length === 0) continue;
        if (statuses.length !== 1 && statuses.length !== codes.length) {
          wrong.push(`SPEC.md:${r.line}: ${codes.length} codes, ${statuses.length} statuses`);
          continue;
        }
        for (const [i, code] of codes.entries()) {
          compared++;
          const status = statuses.length === 1 ? statuses[0]! : statuses[i]!;
          if (ERRORS[code].http !== status) wrong.push(`SPEC.md:${r.line}: ${code} is ${status} there, ${ERRORS[code].http} in errors.ts`);
        }
      }
    }
    expect(wrong).toEqual([]);
    expect(compared).toBeGreaterThanOrEqual(40);
  });

  test("every code is of the form an agent may see: ^[A-Za-z0-9_-]{1,64}$, no card number", () => {
    expect(Object.keys(ERRORS).filter((code) => !isSafeRef(code) || !/^[A-Z][A-Z0-9_]*$/.test(code))).toEqual([]);
  });
});

describe("the desk's outcomes answer with the table's statuses", () => {
  test("a refund's code and its receipt's http_status agree", () => {
    expect(Object.entries(REFUNDS).filter(([, r]) => ERRORS[r.error].http !== statusOf(r.outcome))).toEqual([]);
  });

  test("a charge is 200 and every recorded refusal a client error", () => {
    expect(statusOf("charged")).toBe(200);
    for (const o of [
      "refused_not_allowed",
      "refused_budget",
      "refused_org_budget",
      "refused_rate_limited",
      "refused_tool_unknown",
      "refused_args_invalid",
    ] as const) {
      expect(`${o}: ${statusOf(o) >= 400 && statusOf(o) < 500}`).toBe(`${o}: true`);
    }
  });
});
