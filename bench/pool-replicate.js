'use strict';
// Baseline for whole-server copies, in coucharchive's design: list the
// source server's databases and replicate each with PouchDB's replicator
// (one-shot, default options), POOL databases at once. Target databases
// are created by PouchDB when missing.
//
//   node bench/pool-replicate.js SRC_SERVER_URL DST_SERVER_URL [--pool N] [--batch-size B]
//
// System databases (names starting with "_") are skipped. POOL defaults
// to 64 (coucharchive's --max-workers default); --pool 1 copies one
// database after another. --batch-size sets the replicator's batch_size
// (default: PouchDB's own, 100).
//
// Prints {"tool":"pool-replicate","ok":..,"ms":..,"dbs":..,"docs":docs_written,
// "failed":databases that failed,"pool":N}.

const PouchDB = require('pouchdb');
const { msSince, emit, fail, request, redact } = require('./lib');

const TOOL = 'pool-replicate';

function parseArgs(argv) {
  const pos = [];
  let pool = 64;
  let batchSize = 0;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--pool') {
      pool = Number(argv[++i]);
    } else if (argv[i] === '--batch-size') {
      batchSize = Number(argv[++i]);
    } else {
      pos.push(argv[i]);
    }
  }
  if (pos.length !== 2 || !Number.isInteger(pool) || pool < 1 || !Number.isInteger(batchSize) || batchSize < 0) return null;
  return { src: pos[0].replace(/\/$/, ''), dst: pos[1].replace(/\/$/, ''), pool, batchSize };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (!args) {
    process.stderr.write('usage: node pool-replicate.js SRC_SERVER_URL DST_SERVER_URL [--pool N] [--batch-size B]\n');
    process.exit(2);
  }
  const t0 = process.hrtime.bigint();
  const r = await request(args.src, 'GET', '/_all_dbs');
  if (r.status !== 200) throw new Error(`_all_dbs on ${redact(args.src)}: HTTP ${r.status}`);
  const dbs = r.json.filter((n) => !n.startsWith('_'));
  let next = 0;
  let docs = 0;
  const failed = [];
  async function worker() {
    while (next < dbs.length) {
      const name = dbs[next++];
      const path = '/' + encodeURIComponent(name);
      const src = new PouchDB(args.src + path);
      const dst = new PouchDB(args.dst + path);
      try {
        const res = await PouchDB.replicate(src, dst, args.batchSize ? { batch_size: args.batchSize } : {});
        docs += res.docs_written;
        if (!res.ok || res.status !== 'complete' || res.doc_write_failures > 0) failed.push(name);
      } catch (err) {
        failed.push(name);
        process.stderr.write(`${TOOL}: ${name}: ${(err && err.message) || err}\n`);
      } finally {
        await Promise.all([src.close(), dst.close()]);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(args.pool, dbs.length) }, worker));
  emit({ tool: TOOL, ok: failed.length === 0, ms: msSince(t0), dbs: dbs.length, docs,
    failed: failed.length, failed_dbs: failed.slice(0, 10), pool: args.pool, batch_size: args.batchSize || undefined });
}

main().catch((err) => fail(TOOL, err));
