'use strict';
// Peer: IBM couchrestore (library API, default options) from a couchbackup
// file into a database. couchrestore requires an existing, empty target, so
// the target is recreated empty before the clock starts.
//
//   node bench/couchrestore.js FILE DST_DB_URL [--shim]
//
// Without --shim couchrestore refuses every PouchDB Server 4.2 database as
// "not empty" (its info lacks doc_del_count); see couch-shim.js.
//
// Prints {"tool":"couchrestore","ms":..,"docs":..}.

const fs = require('node:fs');
const couchbackup = require('@cloudant/couchbackup');
const { msSince, emit, fail, recreateDB, dbInfo } = require('./lib');
const { startShim, rebase } = require('./couch-shim');

const args = process.argv.slice(2);
const shim = args.includes('--shim');
const attachments = args.includes('--attachments');
const TOOL = 'couchrestore' + (shim ? '+shim' : '');

async function main() {
  const [file, dst] = args.filter((a) => !a.startsWith('--'));
  if (!file || !dst) {
    process.stderr.write('usage: node couchrestore.js FILE DST_DB_URL [--attachments] [--shim]\n');
    process.exit(2);
  }
  await recreateDB(dst);
  let target = dst;
  let proxy;
  if (shim) {
    proxy = await startShim(new URL(dst).origin);
    target = rebase(dst, proxy.url);
  }
  const t0 = process.hrtime.bigint();
  couchbackup.restore(fs.createReadStream(file), target, attachments ? { attachments: true } : {}, async (err, total) => {
    if (err) return fail(TOOL, err);
    const ms = msSince(t0);
    if (proxy) await proxy.close();
    const info = await dbInfo(dst);
    emit({ tool: TOOL, ok: true, ms, docs: total && total.total, doc_count: info.doc_count });
  });
}

main().catch((err) => fail(TOOL, err));
