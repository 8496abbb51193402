'use strict';
// The copy bound: the plainest pipelined copy of one database, with no
// replication bookkeeping (no checkpoints, no _revs_diff, no retries).
//
//   node bench/bound-copy.js SRC_DB_URL DST_DB_URL [BATCH=500] [PARALLEL=4] [--inline] [--since=SEQ]
//
// Untimed: recreate DST empty (not with --since). Timed: page through
// SRC/_changes?style=all_docs (BATCH rows a page, one page read after the
// other); each page's leaf revisions are read with one
// _bulk_get?revs=true&attachments=true and written with one _bulk_docs
// new_edits=false, up to PARALLEL pages in flight (the next page is read
// while earlier ones are copied).
// --inline reads the pages with include_docs=true&attachments=true instead
// and writes a row's document as it came when its only leaf is a live
// generation-1 revision (its history is its own hash); the other leaves
// still go through _bulk_get. The two modes measure the two ways an
// initial copy can read a server (couch.Caps.InlineDocsUpTo).
// --since=SEQ bounds an incremental copy: DST already holds SRC as it was
// at SEQ (an earlier copy), the feed starts at SEQ, and _bulk_get leaves
// out attachment bodies (stubs): the least any incremental copy must move
// when the changed revisions keep their attachments. A stub the target
// cannot resolve fails the write (and the run).
//
// Prints {"tool":"bound-copy","ms":..,"docs":revisions,"bytes":..}.

const { msSince, emit, fail, request, recreateDB, redact } = require('./lib');

const inline = process.argv.includes('--inline');
const sinceArg = process.argv.find((a) => a.startsWith('--since='));
const startSeq = sinceArg ? sinceArg.slice('--since='.length) : '';
const TOOL = inline ? 'bound-copy-inline' : 'bound-copy';

async function copyPage(src, dst, refs, inlineDocs, stubs) {
  const docs = inlineDocs.slice();
  if (refs.length > 0) {
    const q = stubs ? '/_bulk_get?revs=true' : '/_bulk_get?revs=true&attachments=true';
    const g = await request(src, 'POST', q, { docs: refs });
    if (g.status !== 200) throw new Error(`_bulk_get on ${redact(src)}: HTTP ${g.status}`);
    for (const res of g.json.results) {
      for (const d of res.docs) {
        if (!d.ok) throw new Error(`_bulk_get ${res.id}: ${JSON.stringify(d.error)}`);
        docs.push(d.ok);
      }
    }
  }
  const body = JSON.stringify({ new_edits: false, docs });
  const w = await request(dst, 'POST', '/_bulk_docs', body);
  if (w.status !== 201 && w.status !== 200) {
    throw new Error(`_bulk_docs on ${redact(dst)}: HTTP ${w.status} ${JSON.stringify(w.json).slice(0, 200)}`);
  }
  let failures = 0;
  for (const row of w.json) if (row.error) failures++;
  return { docs: docs.length, bytes: Buffer.byteLength(body), failures };
}

/**
 * Copies the database at src into the existing database at dst: BATCH-row
 * pages of src's feed (from startSeq, '' for all), each page's leaf
 * revisions read with one _bulk_get and written with one _bulk_docs
 * new_edits=false, up to PARALLEL pages in flight. inline reads the pages
 * with include_docs=true&attachments=true. Resolves to { docs, bytes,
 * failures }: revisions written, _bulk_docs body bytes, rows refused.
 */
async function copyDB(src, dst, { batch = 500, parallel = 4, inline = false, startSeq = '' } = {}) {
  let since = startSeq || '0';
  let docs = 0;
  let bytes = 0;
  let failures = 0;
  const inFlight = new Set();
  for (;;) {
    const extra = inline ? '&include_docs=true&attachments=true' : '';
    const r = await request(src, 'GET', `/_changes?style=all_docs${extra}&limit=${batch}&since=${encodeURIComponent(since)}`);
    if (r.status !== 200) throw new Error(`_changes on ${redact(src)}: HTTP ${r.status}`);
    const refs = [];
    const inlineDocs = [];
    for (const row of r.json.results) {
      const d = row.doc;
      if (inline && d && !row.deleted && row.changes.length === 1 && d._rev === row.changes[0].rev && d._rev.startsWith('1-')) {
        inlineDocs.push(d);
        continue;
      }
      for (const c of row.changes) refs.push({ id: row.id, rev: c.rev });
    }
    if (refs.length + inlineDocs.length > 0) {
      while (inFlight.size >= parallel) await Promise.race(inFlight);
      const p = copyPage(src, dst, refs, inlineDocs, Boolean(startSeq)).then((res) => {
        docs += res.docs;
        bytes += res.bytes;
        failures += res.failures;
        inFlight.delete(p);
      });
      inFlight.add(p);
    }
    if (r.json.results.length < batch) break;
    since = r.json.last_seq;
  }
  await Promise.all(inFlight);
  return { docs, bytes, failures };
}

async function main() {
  const [src, dst, batchArg, parArg] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  if (!src || !dst) {
    process.stderr.write('usage: node bound-copy.js SRC_DB_URL DST_DB_URL [BATCH=500] [PARALLEL=4] [--inline] [--since=SEQ]\n');
    process.exit(2);
  }
  const batch = Number(batchArg || 500);
  const parallel = Number(parArg || 4);
  if (!startSeq) await recreateDB(dst);

  const t0 = process.hrtime.bigint();
  const { docs, bytes, failures } = await copyDB(src, dst, { batch, parallel, inline, startSeq });
  const ms = msSince(t0);
  emit({ tool: TOOL, ok: failures === 0, ms, docs, bytes, batch, parallel, doc_write_failures: failures });
}

module.exports = { copyDB };

if (require.main === module) main().catch((err) => fail(TOOL, err));
