'use strict';
// Peer for whole-server copies on CouchDB: CouchDB's own replicator driven
// POOL databases at a time. Lists the source server's databases and, for
// each, sends POST /_replicate (non-continuous: CouchDB answers when that
// database is copied) to the target server with the source and target
// database URLs (credentials as userinfo) and create_target.
//
//   node bench/couch-pool-replicate.js SRC_SERVER_URL DST_SERVER_URL [--pool N] [--workers W --connections C]
//
// System databases (names starting with "_") are skipped. POOL defaults to
// 64. --workers and --connections set each replication's worker_processes
// and http_connections (default: the server's). Requests go through
// node:http with a keep-alive agent and no timeout.
//
// Prints {"tool":"couch-pool-replicate","ok":..,"ms":..,"dbs":..,
// "docs":docs_written,"failed":..,"pool":N}.

const http = require('node:http');
const { msSince, emit, fail, request, rawRequest } = require('./lib');

const TOOL = 'couch-pool-replicate';
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

async function post(serverUrl, path, body) {
  const res = await rawRequest(serverUrl + path, {
    method: 'POST', agent, headers: { Accept: 'application/json', 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  const text = res.body.toString('utf8');
  let json;
  try { json = JSON.parse(text); } catch (_) { json = text; }
  return { status: res.status, json };
}

async function main() {
  const argv = process.argv.slice(2);
  let pool = 64;
  const settings = {};
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--pool') pool = Number(argv[++i]);
    else if (argv[i] === '--workers') settings.worker_processes = Number(argv[++i]);
    else if (argv[i] === '--connections') settings.http_connections = Number(argv[++i]);
    else pos.push(argv[i].replace(/\/$/, ''));
  }
  if (pos.length !== 2 || !Number.isInteger(pool) || pool < 1) {
    process.stderr.write('usage: node couch-pool-replicate.js SRC_SERVER_URL DST_SERVER_URL [--pool N] [--workers W --connections C]\n');
    process.exit(2);
  }
  const [src, dst] = pos;
  const t0 = process.hrtime.bigint();
  const r = await request(src, 'GET', '/_all_dbs');
  if (r.status !== 200) throw new Error(`_all_dbs on ${redact(src)}: HTTP ${r.status}`);
  const dbs = r.json.filter((n) => !n.startsWith('_'));
  let next = 0;
  let docs = 0;
  const failed = [];
  async function worker() {
    while (next < dbs.length) {
      const name = dbs[next++];
      const path = '/' + encodeURIComponent(name);
      try {
        const res = await post(dst, '/_replicate', { source: src + path, target: dst + path, create_target: true, ...settings });
        const h = (res.json && res.json.history && res.json.history[0]) || {};
        if (res.status !== 200 || !res.json.ok || (h.doc_write_failures || 0) > 0) {
          failed.push(name);
          process.stderr.write(`${TOOL}: ${name}: HTTP ${res.status} ${JSON.stringify(res.json).slice(0, 200)}\n`);
        }
        docs += h.docs_written || 0;
      } catch (err) {
        failed.push(name);
        process.stderr.write(`${TOOL}: ${name}: ${(err && err.message) || err}\n`);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(pool, dbs.length) }, worker));
  agent.destroy();
  emit({ tool: TOOL, ok: failed.length === 0, ms: msSince(t0), dbs: dbs.length, docs,
    failed: failed.length, failed_dbs: failed.slice(0, 10), pool, ...settings });
}

main().catch((err) => fail(TOOL, err));
