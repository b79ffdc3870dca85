// Files "another user" made, for the file-trust tests: chown needs root, and a test that cannot
// make them must fail, never pass without having checked anything.
import { lchownSync } from "node:fs";

/** nobody: a user that is never the one running the tests. */
export const OTHER_UID = 65534;

export function giveToOtherUser(...paths: string[]): void {
  if (process.geteuid?.() !== 0) throw new Error("this test makes another user's files with chown, which needs root");
  for (const path of paths) lchownSync(path, OTHER_UID, OTHER_UID);
}
