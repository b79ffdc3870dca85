// The WHERE clause of a filtered read of the desk ledger (records, audit, the export's pages).
/**
 * A WHERE clause naming only the filters given: `(:x IS NULL OR col = :x)` would keep SQLite
 * from the org and key indexes and read the whole table for the smallest org.
 */
export function conditions(
  equal: Record<string, string | null>,
  atLeast: Record<string, number | null>,
): { sql: string; params: Record<string, string | number> } {
  const parts: string[] = [];
  const params: Record<string, string | number> = {};
  for (const [column, value] of Object.entries(equal)) {
    if (value === null) continue;
    parts.push(`${column} = $${column}`);
    params[`$${column}`] = value;
  }
  for (const [column, value] of Object.entries(atLeast)) {
    if (value === null) continue;
    parts.push(`${column} >= $${column}`);
    params[`$${column}`] = value;
  }
  return { sql: parts.length === 0 ? "" : `WHERE ${parts.join(" AND ")}`, params };
}
