'use strict';
// Peer: pouchdb-load (reads a whole pouchdb-replication-stream dump and
// writes it with one bulkDocs new_edits=false) into an empty database
// recreated before the clock starts. With --stream it uses
// pouchdb-replication-stream's own load() instead (streamed, batch by batch).
//
//   node bench/pouchdb-load.js FILE DST_DB_URL [--stream]
//
// Prints {"tool":"pouchdb-load","ms":..,"docs":revisions in the dump,
// "doc_count":target doc_count after the load}.

const fs = require('node:fs');
const PouchDB = require('pouchdb');
const { msSince, emit, fail, recreateDB, dbInfo, quietDeprecation } = require('./lib');

quietDeprecation();

const args = process.argv.slice(2);
const streamed = args.includes('--stream');
const TOOL = streamed ? 'replication-stream-load' : 'pouchdb-load';
if (streamed) {
  PouchDB.plugin(require('pouchdb-replication-stream').plugin);
} else {
  PouchDB.plugin(require('pouchdb-load'));
}

async function main() {
  const [file, dst] = args.filter((a) => !a.startsWith('--'));
  if (!file || !dst) {
    process.stderr.write('usage: node pouchdb-load.js FILE DST_DB_URL [--stream]\n');
    process.exit(2);
  }
  let revs = 0; // revisions in the dump, counted before the clock starts
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('{"docs":')) revs += JSON.parse(line).docs.length;
  }
  await recreateDB(dst);
  const db = new PouchDB(dst);
  const t0 = process.hrtime.bigint();
  if (streamed) {
    await db.load(fs.createReadStream(file));
  } else {
    await db.load(fs.readFileSync(file, 'utf8'));
  }
  const ms = msSince(t0);
  const info = await dbInfo(dst);
  emit({ tool: TOOL, ok: true, ms, docs: revs, doc_count: info.doc_count });
}

main().catch((err) => fail(TOOL, err));
