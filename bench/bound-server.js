'use strict';
// The two bounds of a whole-server copy (many databases): the target's raw
// ingest and the plainest pipelined copy, over every user database.
//
//   node bench/bound-server.js SRC_SERVER_URL DST_SERVER_URL ingest BATCH PARALLEL [--multipart]
//   node bench/bound-server.js SRC_SERVER_URL DST_SERVER_URL copy BATCH PARALLEL [--dbs D]
//
// Untimed in both: list SRC's databases (names starting with "_" are
// skipped) and create each on DST, empty.
// ingest: also untimed, read every database's leaf revisions into
// BATCH-revision _bulk_docs bodies (bound-bulkdocs.js's prepare); timed:
// POST every body to its database, PARALLEL at a time across the server,
// the databases taken in turn (one request each, round robin).
// --multipart: a revision carrying attachments is written by itself as a
// multipart/related PUT with new_edits=false of the body the source gave
// (attachments as raw parts in their stored encoding: no base64, nothing
// for the target to compress again), the cheapest way CouchDB stores
// attachments; the rest as above.
// copy: timed: copy each database with bound-copy.js's pipeline (BATCH-row
// pages of the plain feed, one _bulk_get and one _bulk_docs new_edits=false
// per page, PARALLEL pages in flight per database), D databases at a time
// (default 4). No checkpoints, no _revs_diff, no _security.
// --pids SRC_PID,DST_PID: the servers' process ids on this machine; the
// result then gives the CPU each used during the timed part
// (timed_src_cpu_ms, timed_dst_cpu_ms, from /proc, 10 ms ticks).
//
// Prints {"tool":"bound-server-ingest"|"bound-server-copy","ms":..,
// "docs":revisions,"bytes":..,"dbs":..,"prepare_ms":..[,"timed_src_cpu_ms":..,"timed_dst_cpu_ms":..]}.

const { cpuMs, msSince, emit, fail, request, recreateDB, redact } = require('./lib');
const { prepare, ingest, agent } = require('./bound-bulkdocs');
const { copyDB } = require('./bound-copy');

async function main() {
  const argv = process.argv.slice(2);
  let dbsAtOnce = 4;
  let multipart = false;
  let pids = [];
  const pos = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--dbs') dbsAtOnce = Number(argv[++i]);
    else if (argv[i] === '--multipart') multipart = true;
    else if (argv[i] === '--pids') pids = argv[++i].split(',').map(Number);
    else pos.push(argv[i].replace(/\/$/, ''));
  }
  const [src, dst, mode, batchArg, parArg] = pos;
  const batch = Number(batchArg);
  const parallel = Number(parArg);
  if (!src || !dst || (mode !== 'ingest' && mode !== 'copy') || !(batch > 0) || !(parallel > 0) || !(dbsAtOnce > 0)) {
    process.stderr.write('usage: node bound-server.js SRC_SERVER_URL DST_SERVER_URL ingest|copy BATCH PARALLEL [--multipart] [--dbs D]\n');
    process.exit(2);
  }
  const tool = 'bound-server-' + mode + (multipart ? '-multipart' : '');
  const p0 = process.hrtime.bigint();
  const r = await request(src, 'GET', '/_all_dbs');
  if (r.status !== 200) throw new Error(`_all_dbs on ${redact(src)}: HTTP ${r.status}`);
  const names = r.json.filter((n) => !n.startsWith('_'));
  const path = (n) => '/' + encodeURIComponent(n);
  const perDB = [];
  let docs = 0;
  let bytes = 0;
  for (const n of names) {
    if (mode === 'ingest') {
      const p = await prepare(src + path(n), batch, { multipart });
      docs += p.revs;
      bytes += p.bytes;
      perDB.push([...p.puts.map((put) => ({ dst: dst + path(n), put })), ...p.bodies.map((body) => ({ dst: dst + path(n), body }))]);
    }
    await recreateDB(dst + path(n));
  }
  // round robin over the databases: each database has its own writer on
  // the server, so requests into different databases proceed in parallel
  const jobs = [];
  for (let i = 0; perDB.some((l) => i < l.length); i++) {
    for (const l of perDB) if (i < l.length) jobs.push(l[i]);
  }
  const prepareMs = msSince(p0);

  const cpu0 = pids.map(cpuMs);
  const t0 = process.hrtime.bigint();
  let failures = 0;
  if (mode === 'ingest') {
    failures = await ingest(jobs, parallel);
  } else {
    let next = 0;
    const worker = async () => {
      while (next < names.length) {
        const n = names[next++];
        const res = await copyDB(src + path(n), dst + path(n), { batch, parallel });
        docs += res.docs;
        bytes += res.bytes;
        failures += res.failures;
      }
    };
    await Promise.all(Array.from({ length: Math.min(dbsAtOnce, names.length) }, worker));
  }
  const ms = msSince(t0);
  const cpu = pids.map((pid, i) => (cpu0[i] === null || cpuMs(pid) === null ? undefined : cpuMs(pid) - cpu0[i]));
  agent.destroy();
  emit({ tool, ok: failures === 0, ms, docs, bytes, dbs: names.length, batch, parallel,
    dbs_at_once: mode === 'copy' ? dbsAtOnce : undefined, doc_write_failures: failures, prepare_ms: prepareMs,
    timed_src_cpu_ms: cpu[0], timed_dst_cpu_ms: cpu[1] });
}

main().catch((err) => fail('bound-server', err));
