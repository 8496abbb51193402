'use strict';
// Peer: pouchdb-replication-stream's dump (PouchDB replication into an
// NDJSON stream, default batch_size 50) from a database into a file.
//
//   node bench/replication-stream-dump.js SRC_DB_URL FILE
//
// Prints {"tool":"replication-stream-dump","ms":..,"docs":..,"bytes":..}.

const fs = require('node:fs');
const PouchDB = require('pouchdb');
const replicationStream = require('pouchdb-replication-stream');
const { msSince, emit, fail, quietDeprecation } = require('./lib');

PouchDB.plugin(replicationStream.plugin);
quietDeprecation();
PouchDB.adapter('writableStream', replicationStream.adapters.writableStream);

const TOOL = 'replication-stream-dump';

async function main() {
  const [src, file] = process.argv.slice(2);
  if (!src || !file) {
    process.stderr.write('usage: node replication-stream-dump.js SRC_DB_URL FILE\n');
    process.exit(2);
  }
  const out = fs.createWriteStream(file);
  const t0 = process.hrtime.bigint();
  const finished = new Promise((resolve, reject) => {
    out.on('finish', resolve);
    out.on('error', reject);
  });
  await new PouchDB(src).dump(out); // ends the stream itself
  await finished;
  const ms = msSince(t0);
  // Count the revisions written: every {"docs":[...]} line.
  let docs = 0;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('{"docs":')) docs += JSON.parse(line).docs.length;
  }
  emit({ tool: TOOL, ok: true, ms, docs, bytes: fs.statSync(file).size });
}

main().catch((err) => fail(TOOL, err));
