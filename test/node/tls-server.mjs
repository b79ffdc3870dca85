// Run by Node.js (never Bun): a stand-in approver whose TLS is Node's own OpenSSL, for serve-mcp
// to reach: it demands a client certificate (requestCert, rejectUnauthorized) under the given
// CA, answers every ask as the approver would (201 pending), and prints one JSON line per
// request with what OpenSSL concluded about the client. The first line is {port}.
// Usage: node tls-server.mjs JSON, where JSON is {cert, key, ca} (file paths).
import { readFileSync } from "node:fs";
import { createServer } from "node:https";

const o = JSON.parse(process.argv[2]);
const print = (v) => process.stdout.write(`${JSON.stringify(v)}\n`);

const server = createServer(
  { cert: readFileSync(o.cert), key: readFileSync(o.key), ca: readFileSync(o.ca), requestCert: true, rejectUnauthorized: true },
  (req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      const peer = req.socket.getPeerCertificate();
      print({
        method: req.method,
        url: req.url,
        authorized: req.socket.authorized,
        protocol: req.socket.getProtocol(),
        peer: { subject: peer.subject?.CN, issuer: peer.issuer?.CN },
      });
      const id = JSON.parse(body || "{}").approval_id;
      res.writeHead(201, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(JSON.stringify({ approval_id: id, state: "pending", expires_at: new Date(Date.now() + 600_000).toISOString() }));
    });
  },
);
// A handshake OpenSSL refused (no certificate, or one from another CA).
server.on("tlsClientError", (err) => print({ refused: err.code ?? err.message }));
server.listen(0, "127.0.0.1", () => print({ port: server.address().port }));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
