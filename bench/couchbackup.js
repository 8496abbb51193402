'use strict';
// Peer: IBM couchbackup (library API, default options: full mode,
// parallelism 5, buffer 500) from a database into a file.
//
//   node bench/couchbackup.js SRC_DB_URL FILE [--attachments] [--shallow] [--shim]
//
// --attachments turns on couchbackup's experimental attachment support;
// --shallow uses shallow mode (_all_docs: winners only, no tombstones);
// --shim goes through couch-shim.js, without which full mode never gets
// past its pre-flight check on PouchDB Server 4.2 (see couch-shim.js).
// Prints {"tool":"couchbackup","ms":..,"docs":..,"bytes":file size}.

const fs = require('node:fs');
const couchbackup = require('@cloudant/couchbackup');
const { msSince, emit, fail } = require('./lib');
const { startShim, rebase } = require('./couch-shim');

const args = process.argv.slice(2);
const attachments = args.includes('--attachments');
const shallow = args.includes('--shallow');
const shim = args.includes('--shim');
const TOOL = 'couchbackup' + (shallow ? '-shallow' : '') + (shim ? '+shim' : '');

async function main() {
  let [src, file] = args.filter((a) => !a.startsWith('--'));
  if (!src || !file) {
    process.stderr.write('usage: node couchbackup.js SRC_DB_URL FILE [--attachments] [--shallow] [--shim]\n');
    process.exit(2);
  }
  let proxy;
  if (shim) {
    proxy = await startShim(new URL(src).origin);
    src = rebase(src, proxy.url);
  }
  const out = fs.createWriteStream(file);
  const opts = {};
  if (attachments) opts.attachments = true;
  if (shallow) opts.mode = 'shallow';
  const t0 = process.hrtime.bigint();
  couchbackup.backup(src, out, opts, (err, total) => {
    if (err) return fail(TOOL, err);
    out.end(async () => {
      const ms = msSince(t0);
      if (proxy) await proxy.close();
      emit({ tool: TOOL, ok: true, ms, docs: total && total.total, bytes: fs.statSync(file).size, attachments });
    });
  });
}

main().catch((err) => fail(TOOL, err));
