'use strict';
// A loopback HTTP proxy that papers over two PouchDB Server 4.2 gaps which
// stop IBM couchbackup/couchrestore outright, so that the peers can still be
// measured (their results are then labelled "+shim"):
//
//  1. POST /db/_bulk_get with {"docs":[]} (couchbackup's pre-flight check in
//     full mode) never gets an answer from PouchDB Server; the shim answers
//     {"results":[]} itself.
//     (The IBM SDK gzips request bodies; the shim inflates them first so it
//     can see the list, and forwards them inflated.)
//  2. GET /db lacks doc_del_count, which couchrestore reads as "target not
//     empty"; the shim adds "doc_del_count":0 when the field is missing.
//  3. _changes answers lack "pending", and the IBM SDK's one-off changes
//     follower polls until pending is 0, so couchbackup never finishes its
//     changes spool. The shim adds "pending": 0 when the answer holds fewer
//     rows than the request's limit (else 1, so the follower asks again
//     from last_seq).
//
// Every other request is passed through unchanged.

const http = require('node:http');
const zlib = require('node:zlib');
const { URL } = require('node:url');

/**
 * Starts the shim in front of serverUrl (scheme://host:port, http only) on a
 * free loopback port. Resolves to { url, close() } where url is the shim's
 * base URL (with serverUrl's user info kept, so a DB URL can be rebased).
 */
function startShim(serverUrl) {
  const upstream = new URL(serverUrl);
  if (upstream.protocol !== 'http:') throw new Error('couch-shim: only http upstreams');
  const debug = process.env.SHIM_DEBUG ? (...a) => process.stderr.write(`couch-shim: ${a.join(' ')}\n`) : () => {};
  const server = http.createServer((req, res) => {
    debug(req.method, req.url);
    const path = req.url.split('?')[0];
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      const headers = { ...req.headers, host: upstream.host };
      if (String(req.headers['content-encoding'] || '').toLowerCase() === 'gzip') {
        try {
          body = zlib.gunzipSync(body);
          delete headers['content-encoding'];
          headers['content-length'] = String(body.length);
        } catch (_) { /* pass the bytes through as they came */ }
      }
      if (req.method === 'POST' && /^\/[^/]+\/_bulk_get$/.test(path)) {
        try {
          const parsed = JSON.parse(body.toString('utf8') || '{}');
          if (Array.isArray(parsed.docs) && parsed.docs.length === 0) {
            res.writeHead(200, { 'Content-Type': 'application/json' });
            res.end('{"results":[]}');
            return;
          }
        } catch (_) { /* pass through */ }
      }
      const isInfo = req.method === 'GET' && /^\/[^/_][^/]*\/?$/.test(path);
      const isChanges = /^\/[^/]+\/_changes$/.test(path);
      const limit = Number(new URL(req.url, 'http://x').searchParams.get('limit')) || Infinity;
      if (isInfo || isChanges) delete headers['accept-encoding']; // answers the shim edits come plain
      const up = http.request({
        host: upstream.hostname, port: upstream.port || 80, method: req.method,
        path: req.url, headers,
      }, (ur) => {
        if (!(isInfo || isChanges) || ur.statusCode !== 200) {
          res.writeHead(ur.statusCode, ur.headers);
          ur.pipe(res);
          return;
        }
        const out = [];
        ur.on('data', (c) => out.push(c));
        ur.on('end', () => {
          let text = Buffer.concat(out).toString('utf8');
          try {
            const info = JSON.parse(text);
            if (isInfo && info && info.db_name !== undefined && info.doc_del_count === undefined) {
              info.doc_del_count = 0;
              text = JSON.stringify(info);
            }
            if (isChanges && info && Array.isArray(info.results) && info.pending === undefined) {
              info.pending = info.results.length < limit ? 0 : 1;
              text = JSON.stringify(info);
            }
          } catch (_) { /* pass through */ }
          const headers = { ...ur.headers, 'content-length': Buffer.byteLength(text) };
          delete headers['transfer-encoding'];
          res.writeHead(ur.statusCode, headers);
          res.end(text);
        });
      });
      up.on('error', (err) => { res.writeHead(502); res.end(String(err.message)); });
      up.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const base = new URL(serverUrl);
      base.hostname = '127.0.0.1';
      base.port = String(server.address().port);
      resolve({ url: base, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

/** Returns dbUrl with its scheme, host and port replaced by the shim's. */
function rebase(dbUrl, shimBase) {
  const u = new URL(dbUrl);
  u.hostname = shimBase.hostname;
  u.port = shimBase.port;
  return u.toString().replace(/\/$/, '');
}

module.exports = { startShim, rebase };
