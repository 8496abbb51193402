'use strict';
// Peer in coucharchive's design: replicate the database into a local,
// throw-away on-disk store (PouchDB's LevelDB adapter standing in for a
// local CouchDB), then tar.gz that data directory.
//
//   node bench/coucharchive-dump.js SRC_DB_URL OUT.tar.gz
//
// Prints {"tool":"coucharchive-dump","ms":..,"docs":..,"bytes":archive size,
// "replicate_ms":..,"tar_ms":..}.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const PouchDB = require('pouchdb');
const { msSince, emit, fail } = require('./lib');

const TOOL = 'coucharchive-dump';

async function main() {
  const [src, out] = process.argv.slice(2);
  if (!src || !out) {
    process.stderr.write('usage: node coucharchive-dump.js SRC_DB_URL OUT.tar.gz\n');
    process.exit(2);
  }
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'coucharchive-'));
  try {
    const t0 = process.hrtime.bigint();
    const local = new PouchDB(path.join(work, 'db'));
    const r = await PouchDB.replicate(new PouchDB(src), local);
    await local.close();
    const replicateMs = msSince(t0);
    const t1 = process.hrtime.bigint();
    execFileSync('tar', ['-czf', path.resolve(out), '-C', work, 'db']);
    const tarMs = msSince(t1);
    emit({ tool: TOOL, ok: r.ok, ms: msSince(t0), docs: r.docs_written,
      bytes: fs.statSync(out).size, replicate_ms: replicateMs, tar_ms: tarMs });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err) => fail(TOOL, err));
