'use strict';
// Peer: IBM couchrestore (library API) over several databases in one
// process, one after another: the counterpart of couchbackup-all.js.
//
//   node bench/couchrestore-all.js IN_DIR DST_SERVER_URL DB... [--attachments]
//
// Creates each target database (empty) and restores IN_DIR/DB.json into
// it; prints one result line per database.

const fs = require('node:fs');
const path = require('node:path');
const couchbackup = require('@cloudant/couchbackup');
const { msSince, emit, recreateDB } = require('./lib');

const args = process.argv.slice(2);
const attachments = args.includes('--attachments');
const TOOL = 'couchrestore';

function restoreOne(file, dst) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    couchbackup.restore(fs.createReadStream(file), dst, attachments ? { attachments: true } : {}, (err, total) => {
      if (err) {
        resolve({ tool: TOOL, ok: false, error: String((err && err.message) || err).slice(0, 300) });
        return;
      }
      resolve({ tool: TOOL, ok: true, ms: msSince(t0), docs: total && total.total });
    });
  });
}

async function main() {
  const pos = args.filter((a) => !a.startsWith('--'));
  const [dir, server, ...dbs] = pos;
  if (!dir || !server || dbs.length === 0) {
    process.stderr.write('usage: node couchrestore-all.js IN_DIR DST_SERVER_URL DB... [--attachments]\n');
    process.exit(2);
  }
  let failed = 0;
  for (const db of dbs) {
    const dst = server.replace(/\/$/, '') + '/' + encodeURIComponent(db);
    let r;
    try {
      await recreateDB(dst);
      r = await restoreOne(path.join(dir, db + '.json'), dst);
    } catch (err) {
      r = { tool: TOOL, ok: false, error: String((err && err.message) || err).slice(0, 300) };
    }
    if (!r.ok) failed++;
    emit({ ...r, db });
  }
  process.exit(failed > 0 ? 1 : 0);
}

main();
