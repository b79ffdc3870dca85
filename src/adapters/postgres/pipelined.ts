// A transaction whose BEGIN travels with its first statement and whose COMMIT with its last, on
// one reserved connection: Bun's client sends statements issued without waiting in one flight,
// and PostgreSQL runs them in order. Atomicity is the server's: a statement that fails aborts the
// transaction, and the COMMIT sent behind it then rolls back (the failure is what the caller
// sees). A body that throws before its last statement is rolled back here.
import type { SQL } from "bun";

/** Sends `last` and the COMMIT together; resolves with what `last` returned once both are done. */
export type CommitWith = <R>(last: Promise<R>) => Promise<R>;

export async function pipelinedTransaction<T>(sql: SQL, body: (tx: SQL, commitWith: CommitWith) => Promise<T>): Promise<T> {
  const conn = await sql.reserve();
  let committed = false;
  try {
    const begun = conn`BEGIN`;
    // Sends it now (a query goes when first waited on); its failure, the connection gone, fails
    // the body's first statement too, and it is awaited below.
    begun.catch(() => {});
    const commitWith: CommitWith = async (last) => {
      // A query of Bun's is sent when something first waits on it: `last` must be waited on
      // before the COMMIT exists, or the COMMIT goes first and `last` runs outside the transaction.
      const sent = last.then((value) => value);
      const commit = conn`COMMIT`;
      committed = true;
      const [value] = await Promise.all([sent, commit, begun]);
      return value;
    };
    const value = await body(conn, commitWith);
    await begun;
    if (!committed) {
      committed = true;
      await conn`COMMIT`;
    }
    return value;
  } catch (err) {
    // After a failed COMMIT there is no transaction left; after a failed statement, the COMMIT
    // sent behind it already ended it: the ROLLBACK then only warns.
    await conn`ROLLBACK`.catch(() => {});
    throw err;
  } finally {
    conn.release();
  }
}
