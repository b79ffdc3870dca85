// `ask-only certs DIR`: writes the two CAs and the link certificates, refusing to overwrite.
import { lstatSync } from "node:fs";
import { join } from "node:path";
import { failure, type Streams, usageError } from "../cli/voice.ts";
import { createPrivateFile, openPrivateDir, PrivatePathError } from "../core/private-files.ts";
import { generateDeskCertificates, generateLinkCertificates, isValidHostName } from "../core/tls/generate.ts";

type CertsOptions = { dir: string; hosts: string[]; desk?: boolean; streams: Streams; now: Date };

export async function runCerts(options: CertsOptions): Promise<void> {
  if (options.desk && options.hosts.length > 0) {
    throw usageError(
      "--host names the approver's certificate, which --desk does not make",
      "run certs DIR --host NAME for the link, and certs DIR --desk for the desk",
    );
  }
  for (const host of options.hosts) {
    if (!isValidHostName(host)) {
      throw usageError(`--host ${JSON.stringify(host)} is not a DNS name or an IP address`);
    }
  }
  try {
    await writeCertificates(options);
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    throw err;
  }
}

async function writeCertificates(options: CertsOptions): Promise<void> {
  // A directory another user owns or can write would let them swap a key file for a link of
  // their choosing: it is refused before anything is made (core/private-files.ts).
  const dir = openPrivateDir(options.dir, { create: true }).path;
  const { files } = options.desk
    ? await generateDeskCertificates({ now: options.now })
    : await generateLinkCertificates({ hosts: options.hosts, now: options.now });

  // Refuse before writing anything, so a second run never leaves a half-replaced set. lstat: a
  // link counts as there even when it points nowhere (writing through it would put a key
  // wherever it points).
  for (const file of files) {
    const path = join(dir, file.name);
    if (lstatSync(path, { throwIfNoEntry: false }) !== undefined) {
      throw failure(`${path} already exists; refusing to overwrite it`, "choose another directory or move the old files away");
    }
  }
  for (const file of files) createPrivateFile(join(dir, file.name), file.contents, { mode: file.secret ? 0o600 : 0o644 });

  const width = Math.max(...files.map((f) => f.name.length));
  const copies = options.desk
    ? [
        "copy to the approver:  desk-ca.pem (with --desk-listen HOST:PORT --desk-ca desk-ca.pem)",
        "copy to the desk:      desk.pem desk.key and the link's approver-ca.pem (--approver-cert, --approver-key, --approver-ca)",
      ]
    : ["copy to the approver:  approver.pem approver.key client-ca.pem", "copy to serve-mcp:     client.pem client.key approver-ca.pem"];
  const lines = [
    `certificates written to ${dir}`,
    ...files.map((f) => `  ${f.name.padEnd(width)}  ${f.secret ? "0600" : "0644"}  ${f.role}`),
    "",
    ...copies,
    `the CA private ${options.desk ? "key was" : "keys were"} not kept: to issue new certificates, run certs again into a new directory`,
  ];
  options.streams.out(`${lines.join("\n")}\n`);
}
