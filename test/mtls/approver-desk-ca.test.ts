// The start-up checks on --desk-ca: the desk listener's CA must be a CA of its own. The client CA
// would let an agent's certificate ask to spend; the approver's own CA is the other side's.
import { beforeAll, describe, expect, test } from "bun:test";
import { loadDeskCa, loadTlsFiles, TlsLoadError } from "../../src/core/tls/load.ts";
import { type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { makeDeskPems, writeDeskPems } from "../helpers/certs.ts";
import { tempDir } from "../helpers/tmp.ts";

const dir = tempDir("ask-only-desk-ca-");
let link: LinkPaths;
let desk: ReturnType<typeof writeDeskPems>;
const now = new Date();

beforeAll(async () => {
  link = await writeLink(dir.path);
  desk = writeDeskPems(dir.path, await makeDeskPems());
});

const approver = () =>
  loadTlsFiles(
    { cert: link.approverCert, key: link.approverKey, ca: link.clientCa },
    { side: "approver", labels: { cert: "--cert", key: "--key", ca: "--ca" }, now, cwd: dir.path },
  );
const load = (path: string) => loadDeskCa(path, { label: "--desk-ca", approver: approver(), now, cwd: dir.path });
const refused = (path: string) => {
  try {
    load(path);
  } catch (err) {
    if (err instanceof TlsLoadError) return { message: err.message, hint: err.hint };
    throw err;
  }
  throw new Error("not refused");
};

describe("loadDeskCa", () => {
  test("the desk CA of certs --desk loads, with its subject and fingerprint", () => {
    const ca = load(desk.deskCa);
    expect(ca.caSubject).toBe("CN=ask-only desk CA, O=ask-only");
    expect(ca.caFingerprint256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  });

  test("the client CA is refused: an agent's certificate would reach the desk's listener", () => {
    expect(refused(link.clientCa)).toEqual({
      message: `${link.clientCa} (--desk-ca) is the client CA the agents' listener trusts (${link.clientCa})`,
      hint: "the desk needs a CA of its own: run `ask-only certs DIR --desk` and give its desk-ca.pem",
    });
  });

  test("the approver's own CA, a leaf, a missing file and a file that is no certificate are refused", () => {
    expect(refused(link.approverCa).message).toBe(`${link.approverCa} (--desk-ca) is the CA that signed the approver's own certificate`);
    expect(refused(desk.deskCert).message).toBe(`${desk.deskCert} (--desk-ca) is not a CA certificate`);
    expect(refused(`${dir.path}/none.pem`).message).toBe(`cannot read the desk CA certificate ${dir.path}/none.pem (--desk-ca): ENOENT`);
    expect(refused(desk.deskKey).message).toBe(`${desk.deskKey} (--desk-ca) is not a PEM certificate`);
  });
});
