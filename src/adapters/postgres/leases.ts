// Node leases: each desk node holds a row whose expiry only the database's clock judges, renews
// it while it runs, and takes calls only while it holds it. A node whose lease has run out is
// dead to the others: any live node may refund its open reservations, and each is refunded once
// (settle moves a reservation from open to settled with a conditional UPDATE, so a second sweeper
// finds it settled and changes nothing).
import type { SQL } from "bun";
import type { NodeLease } from "./money.ts";
import { toSafe } from "./money.ts";

export type Registered = { kind: "registered"; lease: NodeLease; expiresAt: Date };

/** The id is held by a lease that has not run out: another process with this id may be running. */
export type HeldElsewhere = { kind: "held"; expiresAt: Date };

/**
 * Takes the lease of node `id` for `leaseMs`. A new id starts at epoch 1; an id whose earlier
 * lease has run out (the same node restarted) takes the next epoch. An id whose lease is still
 * running is refused: two processes with one id would refund each other's calls.
 */
export async function registerNode(sql: SQL, id: string, leaseMs: number): Promise<Registered | HeldElsewhere> {
  const [row] = await sql`
    INSERT INTO nodes (id, epoch, started_at, renewed_at, expires_at)
    VALUES (${id}, 1, clock_timestamp(), clock_timestamp(), clock_timestamp() + ${leaseMs}::integer * interval '1 millisecond')
    ON CONFLICT (id) DO UPDATE SET epoch = nodes.epoch + 1, started_at = excluded.started_at, renewed_at = excluded.renewed_at,
                                   expires_at = excluded.expires_at
      WHERE nodes.expires_at <= clock_timestamp()
    RETURNING epoch, expires_at`;
  if (row !== undefined) return { kind: "registered", lease: { id, epoch: toSafe(row.epoch) }, expiresAt: row.expires_at };
  const [held] = await sql`SELECT expires_at FROM nodes WHERE id = ${id}`;
  return { kind: "held", expiresAt: held.expires_at };
}

/**
 * Extends the lease by `leaseMs` from now (the database's now). False when it is lost: it ran
 * out, or the id registered again under a newer epoch. A lost lease is never renewed.
 */
export async function renewLease(sql: SQL, lease: NodeLease, leaseMs: number): Promise<boolean> {
  const rows = await sql`
    UPDATE nodes SET renewed_at = clock_timestamp(), expires_at = clock_timestamp() + ${leaseMs}::integer * interval '1 millisecond'
     WHERE id = ${lease.id} AND epoch = ${BigInt(lease.epoch)}::bigint AND expires_at > clock_timestamp()
    RETURNING id`;
  return rows.length === 1;
}

/** Ends the lease at once (a clean stop), so live nodes may sweep what is left without waiting. */
export async function releaseLease(sql: SQL, lease: NodeLease): Promise<void> {
  await sql`
    UPDATE nodes SET expires_at = clock_timestamp()
     WHERE id = ${lease.id} AND epoch = ${BigInt(lease.epoch)}::bigint AND expires_at > clock_timestamp()`;
}

/**
 * Open reservations of nodes whose lease has run out, oldest first (the sweep settles each); a
 * call waiting for a person is nobody's in flight (the approvals' sweep settles it).
 */
export async function abandonedByDeadNodes(sql: SQL, limit: number): Promise<number[]> {
  const rows = await sql`
    SELECT r.id FROM reservations r JOIN nodes n ON n.id = r.node_id
     WHERE r.state = 'open' AND n.expires_at <= clock_timestamp() AND r.approval_stage IS DISTINCT FROM 'awaiting'
     ORDER BY r.id LIMIT ${limit}::integer`;
  return rows.map((r: { id: bigint }) => toSafe(r.id));
}

/**
 * This node's own open reservations taken before `beforeMs` (at start-up, every one: they are
 * its previous run's; while running, those older than the upstream timeout); an approved call
 * counts from its claim, and one waiting for a person is not among them.
 */
export async function openReservationsOf(sql: SQL, nodeId: string, beforeMs: number, limit: number): Promise<number[]> {
  const rows = await sql`
    SELECT id FROM reservations WHERE node_id = ${nodeId} AND state = 'open'
       AND (approval_stage IS NULL AND created_at < ${BigInt(Math.min(beforeMs, Number.MAX_SAFE_INTEGER))}::bigint
         OR approval_stage = 'claimed' AND claimed_at < ${BigInt(Math.min(beforeMs, Number.MAX_SAFE_INTEGER))}::bigint)
     ORDER BY id LIMIT ${limit}::integer`;
  return rows.map((r: { id: bigint }) => toSafe(r.id));
}
