'use strict';
// Shared helpers for the benchmark peers: timing, the one-line JSON result,
// redacted URLs and small HTTP calls (Node >= 18 global fetch).

const http = require('node:http');
const { URL } = require('node:url');

/** Milliseconds since t0 (a process.hrtime.bigint()), as a number with 0.1 ms precision. */
function msSince(t0) {
  return Math.round(Number(process.hrtime.bigint() - t0) / 1e5) / 10;
}

/** Returns the URL without user info, for printing. */
function redact(u) {
  try {
    const p = new URL(u);
    p.username = '';
    p.password = '';
    return p.toString().replace(/\/$/, '');
  } catch (_) {
    return '<invalid url>';
  }
}

/**
 * CPU milliseconds (user + system) process pid has used so far, from
 * /proc/PID/stat (fields 14 and 15, in clock ticks of 10 ms); null where
 * /proc cannot be read.
 */
function cpuMs(pid) {
  try {
    const stat = require('node:fs').readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch (_) {
    return null;
  }
}

/** Prints the result as one JSON line on stdout. */
function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

/** Prints an error as one JSON line on stdout (so harnesses still get a line) and exits 1. */
function fail(tool, err) {
  const msg = (err && (err.stack || err.message)) || String(err);
  emit({ tool, ok: false, error: String((err && err.message) || err).slice(0, 500) });
  process.stderr.write(`${tool}: ${msg}\n`);
  process.exit(1);
}

/** Splits user info out of a URL into an Authorization header. */
function httpParts(u) {
  const p = new URL(u);
  const headers = { Accept: 'application/json' };
  if (p.username || p.password) {
    const cred = `${decodeURIComponent(p.username)}:${decodeURIComponent(p.password)}`;
    headers.Authorization = 'Basic ' + Buffer.from(cred).toString('base64');
    p.username = '';
    p.password = '';
  }
  return { base: p.toString().replace(/\/$/, ''), headers };
}

/** Sends one request to dbUrl + path and returns { status, json }. */
async function request(dbUrl, method, path, body) {
  const { base, headers } = httpParts(dbUrl);
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await fetch(base + path, init);
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch (_) { json = text; }
  return { status: res.status, json };
}

/**
 * Sends one request through node:http (no timeout, no decompression: the
 * bytes as the server sent them) to url, whose user info becomes basic
 * auth. Resolves to { status, headers, body } with body a Buffer.
 */
function rawRequest(url, { method = 'GET', headers = {}, body, agent } = {}) {
  const { base, headers: auth } = httpParts(url);
  const u = new URL(base);
  const h = { ...auth, ...headers };
  if (body !== undefined) h['Content-Length'] = Buffer.byteLength(body);
  return new Promise((resolve, reject) => {
    const req = http.request(u, { method, agent, headers: h }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Deletes (if present) and creates the database at dbUrl. */
async function recreateDB(dbUrl) {
  await request(dbUrl, 'DELETE', '');
  const r = await request(dbUrl, 'PUT', '');
  if (r.status !== 201 && r.status !== 202) {
    throw new Error(`create ${redact(dbUrl)}: HTTP ${r.status} ${JSON.stringify(r.json)}`);
  }
}

/** Returns doc_count and doc_del_count of the database at dbUrl. */
async function dbInfo(dbUrl) {
  const r = await request(dbUrl, 'GET', '');
  if (r.status !== 200) throw new Error(`GET ${redact(dbUrl)}: HTTP ${r.status}`);
  return r.json;
}

/**
 * Drops PouchDB 9's "db.type() is deprecated" warning, which
 * pouchdb-replication-stream triggers once per batch; other warnings pass.
 */
function quietDeprecation() {
  const warn = console.warn;
  console.warn = (...a) => {
    if (typeof a[0] === 'string' && a[0].startsWith('db.type() is deprecated')) return;
    warn(...a);
  };
}

module.exports = { quietDeprecation, cpuMs, msSince, redact, emit, fail, request, rawRequest, recreateDB, dbInfo, httpParts };
