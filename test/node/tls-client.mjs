// Run by Node.js (never Bun): one HTTPS request to a server of ours, with Node's own OpenSSL as
// the TLS client: it checks the server's chain (purpose sslserver), its name and the handshake.
// Usage: node tls-client.mjs JSON, where JSON is {port, servername, ca, cert?, key?, method,
// path, body?} with file paths. Prints one JSON line: {answered: true, status, body,
// authorized, protocol, peer} or {answered: false, code}.
import { readFileSync } from "node:fs";
import { request } from "node:https";

const o = JSON.parse(process.argv[2]);
const file = (p) => (p === undefined ? undefined : readFileSync(p));
const print = (v) => process.stdout.write(`${JSON.stringify(v)}\n`);

const req = request(
  {
    host: "127.0.0.1",
    port: o.port,
    servername: o.servername,
    method: o.method,
    path: o.path,
    ca: file(o.ca),
    cert: file(o.cert),
    key: file(o.key),
    rejectUnauthorized: true,
    agent: false,
    headers: o.body === undefined ? {} : { "content-type": "application/json" },
  },
  (res) => {
    let body = "";
    res.setEncoding("utf8");
    res.on("data", (chunk) => {
      body += chunk;
    });
    res.on("end", () => {
      const peer = res.socket.getPeerCertificate();
      print({
        answered: true,
        status: res.statusCode,
        body,
        authorized: res.socket.authorized,
        protocol: res.socket.getProtocol(),
        peer: { subject: peer.subject?.CN, issuer: peer.issuer?.CN },
      });
    });
  },
);
req.on("error", (err) => print({ answered: false, code: err.code ?? err.name }));
req.end(o.body);
