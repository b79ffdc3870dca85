// `npm start`: the main job on a fresh clone. Builds nothing itself (npm start builds first);
// makes certificates in ./certs when there are none, saying so.
import { existsSync } from "node:fs";
import { resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
const binary = resolve(root, "dist/ask-only");
const certs = resolve(root, "certs");

if (!existsSync(resolve(certs, "approver.pem"))) {
  console.error(`start: no certificates in ${certs}; making them now`);
  const made = Bun.spawnSync([binary, "certs", certs], { stdout: "inherit", stderr: "inherit" });
  if (made.exitCode !== 0) process.exit(made.exitCode ?? 1);
} else {
  console.error(`start: using the certificates in ${certs}`);
}
