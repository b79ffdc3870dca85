// Certificates made per test run with the same core code `ask-only certs` uses.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateDeskCertificates, generateLinkCertificates } from "../../src/core/tls/generate.ts";

export type LinkPems = Record<"approverCa" | "clientCa" | "approverCert" | "approverKey" | "clientCert" | "clientKey", string>;

const FILE_OF: Record<keyof LinkPems, string> = {
  approverCa: "approver-ca.pem",
  clientCa: "client-ca.pem",
  approverCert: "approver.pem",
  approverKey: "approver.key",
  clientCert: "client.pem",
  clientKey: "client.key",
};

export async function makeLinkPems(hosts: string[] = []): Promise<LinkPems> {
  const { files } = await generateLinkCertificates({ hosts, now: new Date() });
  const byName = new Map(files.map((f) => [f.name, f.contents]));
  const pems = {} as LinkPems;
  for (const [key, name] of Object.entries(FILE_OF) as [keyof LinkPems, string][]) {
    pems[key] = byName.get(name)!;
  }
  return pems;
}

/** Writes a set into `dir` and returns the paths by role. */
export function writeLinkPems(dir: string, pems: LinkPems): Record<keyof LinkPems, string> {
  const paths = {} as Record<keyof LinkPems, string>;
  for (const [key, name] of Object.entries(FILE_OF) as [keyof LinkPems, string][]) {
    const path = join(dir, name);
    writeFileSync(path, pems[key], { mode: 0o600 });
    paths[key] = path;
  }
  return paths;
}

/** The desk's own set (`certs DIR --desk`): its CA, certificate and key. */
export type DeskPems = { deskCa: string; deskCert: string; deskKey: string };

export async function makeDeskPems(): Promise<DeskPems> {
  const { files } = await generateDeskCertificates({ now: new Date() });
  const byName = new Map(files.map((f) => [f.name, f.contents]));
  return { deskCa: byName.get("desk-ca.pem")!, deskCert: byName.get("desk.pem")!, deskKey: byName.get("desk.key")! };
}

/** Writes the desk's set into `dir` and returns the paths. */
export function writeDeskPems(dir: string, pems: DeskPems): Record<keyof DeskPems, string> {
  const names: Record<keyof DeskPems, string> = { deskCa: "desk-ca.pem", deskCert: "desk.pem", deskKey: "desk.key" };
  const paths = {} as Record<keyof DeskPems, string>;
  for (const [key, name] of Object.entries(names) as [keyof DeskPems, string][]) {
    paths[key] = join(dir, name);
    writeFileSync(paths[key], pems[key], { mode: 0o600 });
  }
  return paths;
}
