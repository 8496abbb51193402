'use strict';
// Peer: PouchDB's live (continuous) replication between two HTTP databases,
// as an application would run it: PouchDB.replicate(src, tgt, {live: true,
// retry: true}). Runs until SIGTERM or SIGINT, then cancels the replication
// and prints one JSON line.
//
//   node bench/pouchdb-live.js SRC_DB_URL DST_DB_URL
//
// Prints {"tool":"pouchdb-live","ok":true,"docs":docs_written,...}.

const PouchDB = require('pouchdb');
const { emit, fail } = require('./lib');

const TOOL = 'pouchdb-live';

function main() {
  const [src, dst] = process.argv.slice(2);
  if (!src || !dst) {
    process.stderr.write('usage: node pouchdb-live.js SRC_DB_URL DST_DB_URL\n');
    process.exit(2);
  }
  let docs = 0;
  let failures = 0;
  const rep = PouchDB.replicate(new PouchDB(src), new PouchDB(dst), { live: true, retry: true });
  rep.on('change', (info) => {
    docs = info.docs_written;
    failures = info.doc_write_failures;
  });
  rep.on('error', (err) => fail(TOOL, err));
  const stop = () => {
    rep.cancel();
    emit({ tool: TOOL, ok: true, docs, doc_write_failures: failures });
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

try { main(); } catch (err) { fail(TOOL, err); }
