'use strict';
// Peer: CouchDB's own replicator, one-shot: POST /_replicate on the
// target server (non-continuous: CouchDB answers when the copy is done),
// with the source and target database URLs (credentials as userinfo, which
// CouchDB's replicator accepts) and create_target.
//
//   node bench/couch-replicate.js SRC_DB_URL DST_DB_URL [WORKER_PROCESSES HTTP_CONNECTIONS]
//
// Without the last two CouchDB's defaults apply (worker_processes 4,
// http_connections 20 in CouchDB 3). The request goes through node:http
// with no timeout (fetch's 300 s header timeout would cut long copies).
//
// Prints {"tool":"couch-replicate","ms":..,"docs":docs_written,...}.

const http = require('node:http');
const { msSince, emit, fail, httpParts, redact } = require('./lib');

const TOOL = 'couch-replicate';

function post(serverUrl, path, body) {
  const { base, headers } = httpParts(serverUrl);
  const u = new URL(base + path);
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: u.hostname, port: u.port, path: u.pathname, method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json', 'Content-Length': data.length },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch (_) { json = text; }
        resolve({ status: res.statusCode, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function main() {
  const [src, dst, wp, hc] = process.argv.slice(2);
  if (!src || !dst) {
    process.stderr.write('usage: node couch-replicate.js SRC_DB_URL DST_DB_URL [WORKER_PROCESSES HTTP_CONNECTIONS]\n');
    process.exit(2);
  }
  const body = { source: src, target: dst, create_target: true };
  if (wp) body.worker_processes = Number(wp);
  if (hc) body.http_connections = Number(hc);
  const server = new URL(dst);
  server.pathname = '';
  const t0 = process.hrtime.bigint();
  const r = await post(server.toString(), '/_replicate', body);
  const ms = msSince(t0);
  if (r.status !== 200 || !r.json || !r.json.ok) {
    throw new Error(`_replicate on ${redact(server.toString())}: HTTP ${r.status} ${JSON.stringify(r.json).slice(0, 300)}`);
  }
  const h = (r.json.history && r.json.history[0]) || {};
  emit({
    tool: TOOL, ok: (h.doc_write_failures || 0) === 0, ms,
    docs: h.docs_written, docs_read: h.docs_read, doc_write_failures: h.doc_write_failures,
    worker_processes: body.worker_processes, http_connections: body.http_connections,
  });
}

main().catch((err) => fail(TOOL, err));
