'use strict';
// The read bound of a backup: the least a tool must ask of the source to
// back it up, read as plainly as possible and thrown away, so that the
// time is the source's own (its CPU serving the documents) plus a thin
// client. No tool that reads every revision with its history and
// attachments can back the databases up faster than this.
//
//   node bench/bound-read.js SERVER_URL DB... [--batch=500] [--parallel=4] [--page=10000]
//
// Per database, one after another: page through
// _changes?style=all_docs&seq_interval=BATCH (PAGE rows a page, as sofa
// asks of CouchDB); each BATCH leaf revisions of a page are read with one
// _bulk_get?revs=true&attachments=true, up to PARALLEL in flight; the
// answers are read to the end and not parsed.
//
// Prints {"tool":"bound-read","ms":..,"docs":revisions,"bytes":answer bytes}.

const { msSince, emit, fail, request, httpParts, redact } = require('./lib');

const TOOL = 'bound-read';

function opt(name, def) {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? Number(a.slice(name.length + 3)) : def;
}

async function bulkGet(dbUrl, refs) {
  const { base, headers } = httpParts(dbUrl);
  const res = await fetch(base + '/_bulk_get?revs=true&attachments=true', {
    method: 'POST',
    headers: { ...headers, 'Content-Type': 'application/json' },
    body: JSON.stringify({ docs: refs }),
  });
  const buf = await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`_bulk_get on ${redact(dbUrl)}: HTTP ${res.status}`);
  return buf.byteLength;
}

async function readDB(dbUrl, batch, parallel, page) {
  let since = '0';
  let docs = 0;
  let bytes = 0;
  const inFlight = new Set();
  const start = (refs) => {
    const p = bulkGet(dbUrl, refs).then((n) => {
      bytes += n;
      inFlight.delete(p);
    });
    inFlight.add(p);
  };
  for (;;) {
    const r = await request(dbUrl, 'GET', `/_changes?style=all_docs&seq_interval=${batch}&limit=${page}&since=${encodeURIComponent(since)}`);
    if (r.status !== 200) throw new Error(`_changes on ${redact(dbUrl)}: HTTP ${r.status}`);
    let refs = [];
    for (const row of r.json.results) {
      for (const c of row.changes) refs.push({ id: row.id, rev: c.rev });
      if (refs.length >= batch) {
        while (inFlight.size >= parallel) await Promise.race(inFlight);
        docs += refs.length;
        start(refs);
        refs = [];
      }
    }
    if (refs.length > 0) {
      while (inFlight.size >= parallel) await Promise.race(inFlight);
      docs += refs.length;
      start(refs);
    }
    if (r.json.results.length < page) break;
    since = r.json.last_seq;
  }
  await Promise.all(inFlight);
  return { docs, bytes };
}

async function main() {
  const [server, ...dbs] = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  if (!server || dbs.length === 0) {
    process.stderr.write('usage: node bound-read.js SERVER_URL DB... [--batch=500] [--parallel=4] [--page=10000]\n');
    process.exit(2);
  }
  const batch = opt('batch', 500);
  const parallel = opt('parallel', 4);
  const page = opt('page', 10000);
  const t0 = process.hrtime.bigint();
  let docs = 0;
  let bytes = 0;
  for (const db of dbs) {
    const r = await readDB(server.replace(/\/$/, '') + '/' + encodeURIComponent(db), batch, parallel, page);
    docs += r.docs;
    bytes += r.bytes;
  }
  emit({ tool: TOOL, ok: true, ms: msSince(t0), docs, bytes, batch, parallel, page });
}

main().catch((err) => fail(TOOL, err));
