// One set of link certificates written to a temp dir, with the paths both processes use.
import { type LinkPems, makeLinkPems, writeLinkPems } from "./certs.ts";

export type LinkPaths = ReturnType<typeof writeLinkPems>;

export async function writeLink(dir: string, pems?: LinkPems): Promise<LinkPaths> {
  return writeLinkPems(dir, pems ?? (await makeLinkPems()));
}

export const approverFiles = (p: LinkPaths) => ({ cert: p.approverCert, key: p.approverKey, ca: p.clientCa });
