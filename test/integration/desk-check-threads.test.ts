// `desk check` on worker threads finds what the check on one thread finds: a forged signature,
// a changed readable copy, a row that differs from its signed receipt, a broken chain and a
// missing link, each planted in the middle of a ledger of several pages (so in a page a thread
// checked while others were in flight), on SQLite and on PostgreSQL. A check stopped midway says
// how far it got and is not complete; a closed checker answers no page.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parseDatabaseUrl } from "../../src/adapters/postgres/connection.ts";
import { PostgresDeskLedger } from "../../src/adapters/postgres/ledger.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { ThreadedReceiptChecker } from "../../src/adapters/threads/receipt-checker.ts";
import { type CheckReport, checkLedger } from "../../src/core/desk/check.ts";
import type { DeskLedger } from "../../src/core/desk/ports.ts";
import { type Envelope, type ReceiptFields, sha256Hex } from "../../src/core/receipt/index.ts";
import { usePostgres } from "../helpers/postgres.ts";
import { type FilledLedger, fillReceipts } from "../helpers/receipt-ledger.ts";
import { tempDir } from "../helpers/tmp.ts";

/** Five pages of 1,000 and a part: the planted receipt sits in the third. */
const RECEIPTS = 5200;
const MIDDLE = 2500;

type Opened = {
  ledger: DeskLedger;
  /** Raw SQL on the ledger's own database, past its append-only triggers. */
  exec(statement: string): Promise<Record<string, unknown>[]>;
  /** SQL for a binary column read as hex, and for a hex literal written as bytes. */
  hex(column: string): string;
  unhex(hex: string): string;
  /** The payload's SHA-256 is a column of its own (SQLite), not read out of the payload (PostgreSQL). */
  storesHash: boolean;
  close(): Promise<void>;
};

const lit = (v: string | number) => (typeof v === "number" ? String(v) : `'${v.replaceAll("'", "''")}'`);

const threaded = (ledger: DeskLedger, extra: Parameters<typeof checkLedger>[1] = {}) =>
  checkLedger(ledger, { checker: (jwks) => new ThreadedReceiptChecker(jwks, 2), pagesInFlight: 4, ...extra });

function describeThreadedCheck(backend: string, open: () => Promise<Opened>) {
  describe(`desk check on threads (${backend})`, () => {
    test("each kind of tampering in the middle of a large ledger is found, as the check on one thread finds it", async () => {
      const o = await open();
      try {
        const filled = await fillReceipts(o.ledger, RECEIPTS);
        const sound = await threaded(o.ledger);
        expect(sound).toEqual({
          ok: ["for every key and period, spent = charges + open reservations", `${RECEIPTS} receipts: signatures, readable copies and 32 key chains intact`],
          problems: [],
          checked: RECEIPTS,
          complete: true,
        });
        const hashColumn = o.storesHash ? `, ${o.hex("sha256")} AS sha256` : "";
        const [row] = await o.exec(
          `SELECT id, key_id, seq, payload, issued_at, ${o.hex("signature")} AS signature${hashColumn} FROM receipts ORDER BY key_id, seq LIMIT 1 OFFSET ${MIDDLE}`,
        );
        const id = String(row!.id);
        const keyId = String(row!.key_id);
        const seq = Number(row!.seq);
        expect(seq).toBeGreaterThan(1);
        const where = `receipt ${id} (key ${keyId} seq ${seq})`;
        const setRow = (assignments: string) => o.exec(`UPDATE receipts SET ${assignments} WHERE id = ${lit(id)}`);
        const stored = (payload: string, signatureHex: string, sha256Hex: string) =>
          `payload = ${lit(payload)}, signature = ${o.unhex(signatureHex)}${o.storesHash ? `, sha256 = ${o.unhex(sha256Hex)}` : ""}`;
        const restore = () =>
          setRow(`${stored(String(row!.payload), String(row!.signature), String(row!.sha256 ?? ""))}, issued_at = ${Number(row!.issued_at)}, envelope = NULL`);
        const envelope = (await o.ledger.records.receipt(id))!.envelope;
        const bothWays = async (): Promise<CheckReport> => {
          const report = await threaded(o.ledger);
          // The same report as one page at a time on this thread.
          expect(report).toEqual(await checkLedger(o.ledger));
          return report;
        };

        // A forged signature: another receipt's signature over this payload.
        const [other] = await o.exec(`SELECT id FROM receipts ORDER BY key_id, seq LIMIT 1 OFFSET ${MIDDLE + 1}`);
        await setRow(`signature = (SELECT signature FROM receipts WHERE id = ${lit(String(other!.id))})`);
        expect((await bothWays()).problems).toEqual([`${where}: signature does not verify under kid ${filled.signer.kid}`]);
        await restore();

        // The readable copy (a converted row's own envelope text) says one more millicent than was signed.
        const readable = JSON.parse(envelope) as Envelope;
        const changed = { ...readable, receipt: { ...readable.receipt, amount_mc: readable.receipt.amount_mc + 1 } };
        await setRow(`envelope = ${lit(JSON.stringify(changed))}`);
        expect((await bothWays()).problems).toEqual([`${where}: readable_copy differs from signed payload at amount_mc`]);
        await restore();

        // The row's own column differs from the signed receipt.
        await setRow("issued_at = issued_at + 1");
        expect((await bothWays()).problems).toEqual([`receipt ${id}: the ledger row differs from the signed receipt`]);
        await restore();

        // A receipt signed for real, with a prev_sha256 that is not its predecessor's: the chain
        // breaks there, and again at the next receipt (which chained to the receipt it replaced).
        const relinked = resigned(filled, readable, { prev_sha256: "0".repeat(64) });
        await setRow(stored(relinked.payload, relinked.signatureHex, relinked.sha256));
        expect((await bothWays()).problems).toEqual([
          `chain of key ${keyId}: prev_sha256 differs from the hash of seq ${seq - 1}`,
          `chain of key ${keyId}: prev_sha256 differs from the hash of seq ${seq}`,
        ]);
        await restore();
        expect((await bothWays()).problems).toEqual([]);

        // A missing link: the receipt deleted (and the count of settled calls no longer agrees).
        await o.exec(`DELETE FROM receipts WHERE id = ${lit(id)}`);
        const gone = await bothWays();
        expect(gone.problems).toContain(
          `chain of key ${keyId}: seq ${seq + 1} after seq ${seq - 1}; expected seq ${seq} (a receipt is missing or out of order)`,
        );
        expect(gone.problems.filter((p) => p.startsWith("chain of key"))).toHaveLength(1);
        expect(gone).toMatchObject({ checked: RECEIPTS - 1, complete: true });
      } finally {
        await o.close();
      }
    }, 120_000);

    test("a check stopped midway says how far it got, is not complete, and passes nothing", async () => {
      const o = await open();
      try {
        await fillReceipts(o.ledger, 6000);
        const stop = new AbortController();
        const report = await threaded(o.ledger, {
          pagesInFlight: 2,
          signal: stop.signal,
          onProgress: (n) => {
            if (n >= 1000) stop.abort();
          },
        });
        expect(report.complete).toBe(false);
        // The pages in flight when it stopped are finished: whole pages, fewer than all.
        expect(report.checked % 1000).toBe(0);
        expect(report.checked).toBeGreaterThanOrEqual(1000);
        expect(report.checked).toBeLessThan(6000);
        expect(report.ok).toEqual(["for every key and period, spent = charges + open reservations"]);
        expect(report.problems).toEqual([]);
      } finally {
        await o.close();
      }
    }, 60_000);
  });
}

/** The receipt's fields changed by `patch` and signed again by the desk's key: what a ledger stores of it. */
function resigned(filled: FilledLedger, envelope: Envelope, patch: Partial<ReceiptFields>): { payload: string; signatureHex: string; sha256: string } {
  const { v: _v, kid: _kid, ...fields } = envelope.receipt as unknown as Record<string, unknown>;
  const signed = filled.signer.sign({ ...(fields as ReceiptFields), ...patch });
  const payload = Buffer.from(signed.payload, "base64url").toString("utf8");
  return { payload, signatureHex: Buffer.from(signed.signature, "base64url").toString("hex"), sha256: sha256Hex(payload) };
}

describeThreadedCheck("SQLite", async () => {
  const tmp = tempDir("desk-check-threads-");
  const ledger = new SqliteDeskLedger(join(tmp.path, "desk.db"));
  const db = ledger.testOnlyDatabase();
  db.run("DROP TRIGGER receipts_no_update");
  db.run("DROP TRIGGER receipts_no_delete");
  return {
    ledger,
    exec: async (statement) => db.query(statement).all() as Record<string, unknown>[],
    hex: (column) => `hex(${column})`,
    unhex: (hex) => `X'${hex}'`,
    storesHash: true,
    async close() {
      await ledger.close();
      tmp[Symbol.dispose]();
    },
  };
});

const pg = usePostgres();
describeThreadedCheck("PostgreSQL", async () => {
  const { url } = await pg.server.createDatabase();
  const ledger = await PostgresDeskLedger.open(parseDatabaseUrl(url), { nodeId: "node-a", pool: { max: 8 } });
  const sql = ledger.testOnlySql();
  await sql.unsafe("ALTER TABLE receipts DISABLE TRIGGER receipts_append_only");
  return {
    ledger,
    exec: async (statement) => (await sql.unsafe(statement)) as Record<string, unknown>[],
    hex: (column) => `encode(${column}, 'hex')`,
    unhex: (hex) => `decode('${hex}', 'hex')`,
    storesHash: false,
    close: () => ledger.close(),
  };
});

describe("the threaded receipt checker", () => {
  test("closed, it answers no page: what was handed in is rejected, never counted as checked", async () => {
    const checker = new ThreadedReceiptChecker({ keys: [] }, 1);
    const page = checker.check([]);
    await checker.close();
    await expect(page).rejects.toThrow("the receipt checker was closed");
    await expect(checker.check([])).rejects.toThrow("the receipt checker was closed");
  });
});
