// The exclusive create behind `ask-only certs` (SPEC 2): what appears between the check and the
// write (a file, or a link to somewhere else) is neither overwritten nor followed.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeNewFile } from "../../src/commands/certs.ts";
import { tempDir } from "../helpers/tmp.ts";

describe("writeNewFile", () => {
  test("creates the file with its mode, whatever the umask", () => {
    using tmp = tempDir();
    const old = process.umask(0o077);
    try {
      writeNewFile(join(tmp.path, "a.pem"), "public", 0o644);
      writeNewFile(join(tmp.path, "a.key"), "secret", 0o600);
    } finally {
      process.umask(old);
    }
    expect(statSync(join(tmp.path, "a.pem")).mode & 0o777).toBe(0o644);
    expect(statSync(join(tmp.path, "a.key")).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(tmp.path, "a.key"), "utf8")).toBe("secret");
  });

  test("an existing file is left as it was", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "client.key");
    writeFileSync(path, "precious");
    expect(() => writeNewFile(path, "new key", 0o600)).toThrow(`${path} already exists; refusing to overwrite it`);
    expect(readFileSync(path, "utf8")).toBe("precious");
  });

  test("a link that points nowhere is not followed (O_EXCL)", () => {
    using tmp = tempDir();
    const target = join(tmp.path, "elsewhere.key");
    const path = join(tmp.path, "client.key");
    symlinkSync(target, path);
    expect(() => writeNewFile(path, "new key", 0o600)).toThrow(`${path} already exists; refusing to overwrite it`);
    expect(existsSync(target)).toBe(false);
  });
});
