// The checkpointing thread's program, as source text: Bun starts it from a Blob, which works the
// same run from source and inside the compiled binary (a worker file would need a path of its
// own in each). Its own connection, PASSIVE checkpoints only, so writers never wait on it.
export const CHECKPOINT_WORKER_SOURCE = `
import { Database } from "bun:sqlite";
let db = null;
let timer = null;
const checkpoint = () => db.query("PRAGMA wal_checkpoint(PASSIVE)").get();
self.onmessage = (e) => {
  if (e.data.op === "start") {
    db = new Database(e.data.path);
    db.run("PRAGMA busy_timeout = 100");
    timer = setInterval(() => { try { checkpoint(); } catch {} }, e.data.everyMs);
  } else if (e.data.op === "now") {
    try { postMessage({ op: "now", result: checkpoint() }); } catch (err) { postMessage({ op: "now", error: String(err) }); }
  } else if (e.data.op === "stop") {
    clearInterval(timer);
    try { checkpoint(); } catch {}
    db.close();
    postMessage({ op: "stopped" });
  }
};
`;
