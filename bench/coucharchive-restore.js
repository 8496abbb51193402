'use strict';
// Peer in coucharchive's design, restore side: untar the archive made by
// coucharchive-dump.js, open the LevelDB store and replicate it into the
// target database (recreated empty before the clock starts).
//
//   node bench/coucharchive-restore.js IN.tar.gz DST_DB_URL
//
// Prints {"tool":"coucharchive-restore","ms":..,"docs":..,"untar_ms":..}.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const PouchDB = require('pouchdb');
const { msSince, emit, fail, recreateDB } = require('./lib');

const TOOL = 'coucharchive-restore';

async function main() {
  const [archive, dst] = process.argv.slice(2);
  if (!archive || !dst) {
    process.stderr.write('usage: node coucharchive-restore.js IN.tar.gz DST_DB_URL\n');
    process.exit(2);
  }
  await recreateDB(dst);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'coucharchive-'));
  try {
    const t0 = process.hrtime.bigint();
    execFileSync('tar', ['-xzf', path.resolve(archive), '-C', work]);
    const untarMs = msSince(t0);
    const local = new PouchDB(path.join(work, 'db'));
    const r = await PouchDB.replicate(local, new PouchDB(dst));
    await local.close();
    emit({ tool: TOOL, ok: r.ok, ms: msSince(t0), docs: r.docs_written, untar_ms: untarMs });
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err) => fail(TOOL, err));
