'use strict';
// Peer: IBM couchbackup (library API, full mode) over several databases in
// one process, one database after another, as a user scripting a
// whole-server backup with the library would (no Node.js start-up per
// database).
//
//   node bench/couchbackup-all.js SRC_SERVER_URL OUT_DIR DB... [--attachments]
//
// Writes OUT_DIR/DB.json per database and prints one result line per
// database: {"tool":"couchbackup","db":..,"ok":..,"ms":..,"docs":..,"bytes":..}.
// Credentials in the URL are passed as couchbackup takes them (userinfo).

const fs = require('node:fs');
const path = require('node:path');
const couchbackup = require('@cloudant/couchbackup');
const { msSince, emit } = require('./lib');

const args = process.argv.slice(2);
const attachments = args.includes('--attachments');
const TOOL = 'couchbackup';

function backupOne(src, file) {
  return new Promise((resolve) => {
    const out = fs.createWriteStream(file);
    const opts = attachments ? { attachments: true } : {};
    const t0 = process.hrtime.bigint();
    couchbackup.backup(src, out, opts, (err, total) => {
      if (err) {
        out.destroy();
        resolve({ tool: TOOL, ok: false, error: String((err && err.message) || err).slice(0, 300) });
        return;
      }
      out.end(() => resolve({ tool: TOOL, ok: true, ms: msSince(t0), docs: total && total.total, bytes: fs.statSync(file).size }));
    });
  });
}

async function main() {
  const pos = args.filter((a) => !a.startsWith('--'));
  const [server, dir, ...dbs] = pos;
  if (!server || !dir || dbs.length === 0) {
    process.stderr.write('usage: node couchbackup-all.js SRC_SERVER_URL OUT_DIR DB... [--attachments]\n');
    process.exit(2);
  }
  let failed = 0;
  for (const db of dbs) {
    const r = await backupOne(server.replace(/\/$/, '') + '/' + encodeURIComponent(db), path.join(dir, db + '.json'));
    if (!r.ok) failed++;
    emit({ ...r, db });
  }
  process.exit(failed > 0 ? 1 : 0);
}

main();
