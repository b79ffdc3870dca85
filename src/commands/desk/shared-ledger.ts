// The desk's ledger in PostgreSQL (--database), as the command opens it: this node's id from its
// data directory, the schema migrated under the advisory lock, the node's lease, and the sealing
// key checked against the one every node on the database must hold. Every failure to start
// becomes the command's failure with a hint, naming the file or the database (never a password).
import { createHash } from "node:crypto";
import { type DatabaseTarget, DatabaseUrlError, describeTarget } from "../../adapters/postgres/connection.ts";
import { failureName } from "../../adapters/postgres/db.ts";
import { PostgresDeskLedger, SchemaMissing } from "../../adapters/postgres/ledger.ts";
import { SchemaTooNew } from "../../adapters/postgres/migrate.ts";
import { type LeaseTiming, NodeIdHeld } from "../../adapters/postgres/node.ts";
import { failure } from "../../cli/voice.ts";
import type { Log } from "../../core/desk/ports.ts";
import { type DataDir, readSecret } from "./data-dir.ts";

/** The meta row holding the fingerprint of the sealing key all nodes share. */
const SEALING_KEY_META = "sealing_key_sha256";
const NODE_ID = /^node_[a-z0-9]{1,32}$/;

/** What the database records of the sealing key: a hash under a label of its own, never the key. */
export function sealingFingerprint(raw: Uint8Array): string {
  return createHash("sha256").update("ask-only sealing key fingerprint\0").update(raw).digest("hex");
}

/** This node's id, as its data directory keeps it. */
export function nodeIdOf(paths: DataDir): string {
  const id = readSecret(paths.nodeId).toString("utf8").trim();
  if (!NODE_ID.test(id))
    throw failure(`${paths.nodeId} does not hold a node id`, "remove it to have a new one made (this node's calls in flight are then left to the other nodes)");
  return id;
}

/** Opens the ledger on `target`, as node `nodeId` (null: no node, for `desk check`), or stops the command. */
export async function openSharedLedger(
  target: DatabaseTarget,
  o: { nodeId: string | null; migrate?: boolean; lease?: LeaseTiming; log: Log },
): Promise<PostgresDeskLedger> {
  const where = describeTarget(target);
  try {
    return await PostgresDeskLedger.open(target, {
      nodeId: o.nodeId,
      log: o.log,
      migrate: o.migrate ?? true,
      ...(o.lease === undefined ? {} : { lease: o.lease }),
    });
  } catch (err) {
    if (err instanceof DatabaseUrlError) throw failure(err.message, err.hint);
    if (err instanceof SchemaTooNew || err instanceof SchemaMissing) throw failure(`${where}: ${err.message}`, err.hint);
    if (err instanceof NodeIdHeld) {
      throw failure(`${err.message} on ${where}`, "another desk runs with this data directory's node-id: give each node its own --data directory");
    }
    const name = failureName(err);
    throw failure(`cannot use the database ${where}: ${name}`, "check that PostgreSQL runs there and that the URL's user, password and sslmode are right");
  }
}

/**
 * The first node to start records the sealing key's fingerprint; every other node must hold the
 * same key, since it opens what the others sealed (upstream credentials). Another key stops the
 * node, naming its file.
 */
export async function checkSealingKey(ledger: PostgresDeskLedger, sealingKeyFile: string, raw: Uint8Array): Promise<void> {
  const mine = sealingFingerprint(raw);
  if (await ledger.records.setMetaOnce(SEALING_KEY_META, mine)) return;
  const stored = await ledger.records.meta(SEALING_KEY_META);
  if (stored !== mine) {
    throw failure(
      `${sealingKeyFile} is not the sealing key of the desks on this database`,
      "copy sealing.key from the data directory of a node already running on it (every node must hold the same one)",
    );
  }
}
