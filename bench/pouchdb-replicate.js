'use strict';
// Peer: PouchDB's replicator, one-shot, default options, between two HTTP
// databases. The target is created by PouchDB if missing.
//
//   node bench/pouchdb-replicate.js SRC_DB_URL DST_DB_URL [BATCH_SIZE]
//
// BATCH_SIZE sets the replicator's batch_size (its default is 100).
//
// Prints {"tool":"pouchdb-replicate","ms":..,"docs":docs_written,...}.

const PouchDB = require('pouchdb');
const { msSince, emit, fail } = require('./lib');

const TOOL = 'pouchdb-replicate';

async function main() {
  const [src, dst, batch] = process.argv.slice(2);
  if (!src || !dst) {
    process.stderr.write('usage: node pouchdb-replicate.js SRC_DB_URL DST_DB_URL [BATCH_SIZE]\n');
    process.exit(2);
  }
  const t0 = process.hrtime.bigint();
  const opts = batch ? { batch_size: Number(batch) } : {};
  const r = await PouchDB.replicate(new PouchDB(src), new PouchDB(dst), opts);
  const ms = msSince(t0);
  emit({
    tool: TOOL, ok: r.ok && r.status === 'complete', ms,
    docs: r.docs_written, docs_read: r.docs_read,
    doc_write_failures: r.doc_write_failures, errors: (r.errors || []).length,
    batch_size: opts.batch_size,
  });
}

main().catch((err) => fail(TOOL, err));
