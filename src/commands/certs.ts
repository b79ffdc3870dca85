// `ask-only certs DIR`: writes the two CAs and the link certificates, refusing to overwrite.
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, statSync, writeSync } from "node:fs";
import { join, resolve } from "node:path";
import { failure, type Streams, usageError } from "../cli/voice.ts";
import { generateLinkCertificates, isValidHostName } from "../core/tls/generate.ts";

export async function runCerts(options: {
  dir: string;
  hosts: string[];
  streams: Streams;
  now: Date;
}): Promise<void> {
  for (const host of options.hosts) {
    if (!isValidHostName(host)) {
      throw usageError(`--host ${JSON.stringify(host)} is not a DNS name or an IP address`);
    }
  }
  const dir = resolve(options.dir);
  if (existsSync(dir) && !statSync(dir).isDirectory()) throw failure(`${dir} exists and is not a directory`);
  const { files } = await generateLinkCertificates({ hosts: options.hosts, now: options.now });

  // Refuse before writing anything, so a second run never leaves a half-replaced set. lstat: a
  // link counts as there even when it points nowhere (writing through it would put a key
  // wherever it points).
  for (const file of files) {
    const path = join(dir, file.name);
    if (lstatSync(path, { throwIfNoEntry: false }) !== undefined) {
      throw failure(`${path} already exists; refusing to overwrite it`, "choose another directory or move the old files away");
    }
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const file of files) writeNewFile(join(dir, file.name), file.contents, file.secret ? 0o600 : 0o644);

  const width = Math.max(...files.map((f) => f.name.length));
  const lines = [
    `certificates written to ${dir}`,
    ...files.map((f) => `  ${f.name.padEnd(width)}  ${f.secret ? "0600" : "0644"}  ${f.role}`),
    "",
    "copy to the approver:  approver.pem approver.key client-ca.pem",
    "copy to serve-mcp:     client.pem client.key approver-ca.pem",
    "the CA private keys were not kept: to issue new certificates, run certs again into a new directory",
  ];
  options.streams.out(`${lines.join("\n")}\n`);
}

/**
 * Creates a file that did not exist, with `mode` whatever the umask says. O_EXCL: a file or link
 * that appeared since the check in runCerts is neither overwritten nor followed.
 */
export function writeNewFile(path: string, contents: string, mode: 0o600 | 0o644): void {
  let fd: number;
  try {
    fd = openSync(path, "wx", mode);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw failure(`${path} already exists; refusing to overwrite it`);
    throw failure(`cannot write ${path}: ${code ?? String(err)}`);
  }
  try {
    writeSync(fd, contents);
  } finally {
    closeSync(fd);
  }
  chmodSync(path, mode);
}
