'use strict';
// The physical bound: the target server's raw ingest of the same revisions.
//
//   node bench/bound-bulkdocs.js SRC_DB_URL DST_DB_URL [BATCH=500] [PARALLEL=4]
//
// Untimed: read every leaf revision of SRC (ids and revs from
// _changes?style=all_docs, bodies with history and inline attachments from
// _bulk_get?revs=true&attachments=true), serialise them into BATCH-revision
// _bulk_docs bodies with new_edits=false, and recreate DST empty.
// Timed: POST the bodies to DST/_bulk_docs, PARALLEL requests at a time.
//
// Prints {"tool":"bound-bulkdocs","ms":..,"docs":revisions,"bytes":..,
// "prepare_ms":..}.

const http = require('node:http');
const { msSince, emit, fail, request, rawRequest, recreateDB, redact } = require('./lib');

const TOOL = 'bound-bulkdocs';
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

async function leafRevs(src) {
  const r = await request(src, 'GET', '/_changes?style=all_docs');
  if (r.status !== 200) throw new Error(`_changes on ${redact(src)}: HTTP ${r.status}`);
  const out = [];
  for (const row of r.json.results) {
    for (const c of row.changes) out.push({ id: row.id, rev: c.rev });
  }
  return out;
}

async function fetchRevs(src, refs, chunk) {
  const docs = [];
  for (let i = 0; i < refs.length; i += chunk) {
    const r = await request(src, 'POST', '/_bulk_get?revs=true&attachments=true',
      { docs: refs.slice(i, i + chunk) });
    if (r.status !== 200) throw new Error(`_bulk_get on ${redact(src)}: HTTP ${r.status}`);
    for (const res of r.json.results) {
      for (const d of res.docs) {
        if (!d.ok) throw new Error(`_bulk_get ${res.id}: ${JSON.stringify(d.error)}`);
        docs.push(d.ok);
      }
    }
  }
  return docs;
}

/**
 * Reads one revision of a document from the database at src the way
 * CouchDB's replicator does, as multipart/related with its attachments in
 * their stored encoding (revs=true&attachments=true&att_encoding_info=true,
 * raw bytes: no base64, no decompression), ready to PUT as is.
 */
async function fetchMultipart(src, id, rev) {
  const q = `/${encodeURIComponent(id)}?rev=${encodeURIComponent(rev)}&revs=true&attachments=true&att_encoding_info=true`;
  const res = await rawRequest(src + q, { agent, headers: { Accept: 'multipart/related' } });
  if (res.status !== 200) throw new Error(`GET ${redact(src)}/${id}: HTTP ${res.status}`);
  return { body: res.body, ctype: res.headers['content-type'] };
}

/**
 * Reads every leaf revision of the database at src (with history and
 * inline attachments) and serialises them into BATCH-revision _bulk_docs
 * bodies with new_edits=false. With multipart, a revision carrying
 * attachments becomes its own multipart/related PUT instead, as read by
 * fetchMultipart (puts:
 * { path, body, ctype }, path relative to the database). Resolves to
 * { revs, bodies, puts, bytes }.
 */
async function prepare(src, batch, { multipart = false } = {}) {
  const refs = await leafRevs(src);
  let docs = await fetchRevs(src, refs, 100);
  const puts = [];
  let bytes = 0;
  if (multipart) {
    const plain = [];
    for (const d of docs) {
      if (!d._attachments || !Object.values(d._attachments).some((a) => a.data !== undefined)) {
        plain.push(d);
        continue;
      }
      const m = await fetchMultipart(src, d._id, d._rev);
      bytes += m.body.length;
      puts.push({ path: '/' + encodeURIComponent(d._id) + '?new_edits=false', body: m.body, ctype: m.ctype });
    }
    docs = plain;
  }
  const bodies = [];
  for (let i = 0; i < docs.length; i += batch) {
    const b = JSON.stringify({ new_edits: false, docs: docs.slice(i, i + batch) });
    bytes += Buffer.byteLength(b);
    bodies.push(b);
  }
  return { revs: refs.length, bodies, puts, bytes };
}

/** PUTs one multipart/related body at dst + path; returns the rows refused (0 or 1). */
async function putMultipart(dst, { path, body, ctype }) {
  const res = await rawRequest(dst + path, { method: 'PUT', agent, headers: { 'Content-Type': ctype }, body });
  if (res.status !== 201 && res.status !== 202) {
    throw new Error(`PUT ${redact(dst)}${path.split('?')[0]}: HTTP ${res.status} ${res.body.toString().slice(0, 200)}`);
  }
  return 0;
}

/**
 * POSTs each { dst, body } of jobs to dst/_bulk_docs (or PUTs each
 * { dst, put } with putMultipart), PARALLEL at a time.
 * Resolves to the rows refused; rejects on a failed request.
 */
async function ingest(jobs, parallel) {
  let next = 0;
  let failures = 0;
  async function worker() {
    while (next < jobs.length) {
      const { dst, body, put } = jobs[next++];
      if (put) {
        failures += await putMultipart(dst, put);
        continue;
      }
      const r = await request(dst, 'POST', '/_bulk_docs', body);
      if (r.status !== 201 && r.status !== 200) {
        throw new Error(`_bulk_docs on ${redact(dst)}: HTTP ${r.status} ${JSON.stringify(r.json).slice(0, 200)}`);
      }
      for (const row of r.json) if (row.error) failures++;
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker));
  return failures;
}

async function main() {
  const [src, dst, batchArg, parArg] = process.argv.slice(2);
  if (!src || !dst) {
    process.stderr.write('usage: node bound-bulkdocs.js SRC_DB_URL DST_DB_URL [BATCH=500] [PARALLEL=4]\n');
    process.exit(2);
  }
  const batch = Number(batchArg || 500);
  const parallel = Number(parArg || 4);

  const p0 = process.hrtime.bigint();
  const { revs, bodies, bytes } = await prepare(src, batch);
  await recreateDB(dst);
  const prepareMs = msSince(p0);

  const t0 = process.hrtime.bigint();
  const failures = await ingest(bodies.map((body) => ({ dst, body })), parallel);
  const ms = msSince(t0);
  emit({ tool: TOOL, ok: failures === 0, ms, docs: revs, bytes, batch, parallel,
    doc_write_failures: failures, prepare_ms: prepareMs });
}

module.exports = { prepare, ingest, agent };

if (require.main === module) main().catch((err) => fail(TOOL, err));
