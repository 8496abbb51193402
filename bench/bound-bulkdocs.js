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

const { msSince, emit, fail, request, recreateDB, redact } = require('./lib');

const TOOL = 'bound-bulkdocs';

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

async function main() {
  const [src, dst, batchArg, parArg] = process.argv.slice(2);
  if (!src || !dst) {
    process.stderr.write('usage: node bound-bulkdocs.js SRC_DB_URL DST_DB_URL [BATCH=500] [PARALLEL=4]\n');
    process.exit(2);
  }
  const batch = Number(batchArg || 500);
  const parallel = Number(parArg || 4);

  const p0 = process.hrtime.bigint();
  const refs = await leafRevs(src);
  const docs = await fetchRevs(src, refs, 100);
  const bodies = [];
  let bytes = 0;
  for (let i = 0; i < docs.length; i += batch) {
    const b = JSON.stringify({ new_edits: false, docs: docs.slice(i, i + batch) });
    bytes += Buffer.byteLength(b);
    bodies.push(b);
  }
  docs.length = 0;
  await recreateDB(dst);
  const prepareMs = msSince(p0);

  let next = 0;
  let failures = 0;
  async function worker() {
    while (next < bodies.length) {
      const body = bodies[next++];
      const r = await request(dst, 'POST', '/_bulk_docs', body);
      if (r.status !== 201 && r.status !== 200) {
        throw new Error(`_bulk_docs on ${redact(dst)}: HTTP ${r.status} ${JSON.stringify(r.json).slice(0, 200)}`);
      }
      for (const row of r.json) if (row.error) failures++;
    }
  }
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: parallel }, worker));
  const ms = msSince(t0);
  emit({ tool: TOOL, ok: failures === 0, ms, docs: refs.length, bytes, batch, parallel,
    doc_write_failures: failures, prepare_ms: prepareMs });
}

main().catch((err) => fail(TOOL, err));
