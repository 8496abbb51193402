package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/internal/dataset"
)

// serverIngestWide are the whole-server ingest bound's settings tried
// besides -bound-sweep: across many databases more requests in flight
// can pay (each database has its own writer on the server).
var serverIngestWide = pairList{{500, 16}, {500, 32}}

// serverCopyDBs are the databases at a time of the whole-server copy
// bound (bench/bound-server.js copy --dbs): the best counts.
var serverCopyDBs = []int{4, 16}

// realTool is one run of the real-data case: its table name and how it
// copies src into tgt (every database).
type realTool struct {
	name  string
	bound bool
	run   func(src, tgt *server, b record) record
}

// realTools lists sofa, the peers (PouchDB's replicator -real-pool and
// -pool databases at a time, at its default batch_size and each of
// -pouch-batches; on CouchDB its replicator the same ways with its
// defaults and each -couch-rep-sweep setting) and the whole-server
// bounds (bench/bound-server.js: the ingest bound per -bound-sweep, on
// CouchDB also with multipart PUTs for attachments; the
// copy bound per -copy-bound and serverCopyDBs).
func (e *env) realTools(ctx context.Context, couch bool) []realTool {
	peer := func(name, script string, args ...string) realTool {
		return realTool{name: name, run: func(src, tgt *server, b record) record {
			n, a := e.node(script, append([]string{src.URL, tgt.URL}, args...)...)
			r, o := e.runTool(ctx, b, []*server{src, tgt}, n, a...)
			applyPeer(&r, o)
			return r
		}}
	}
	sofaRun := func(name, bin string) realTool {
		return realTool{name: name, run: func(src, tgt *server, b record) record {
			r, o := e.runTool(ctx, b, []*server{src, tgt}, bin, "replicate", src.URL, tgt.URL, "--json")
			applySofa(&r, o)
			return r
		}}
	}
	tools := []realTool{sofaRun("sofa", e.sofa)}
	if e.cfg.sofaAlt != "" {
		tools = append(tools, sofaRun("sofa-alt", e.cfg.sofaAlt))
	}
	one, pool := strconv.Itoa(e.cfg.realPouchP), strconv.Itoa(e.cfg.pool)
	tools = append(tools,
		peer("pouchdb-replicate per db (pool "+one+")", "pool-replicate.js", "--pool", one),
		peer("pouchdb-replicate pool "+pool, "pool-replicate.js", "--pool", pool))
	for _, n := range e.cfg.pouchBatches {
		bs := strconv.Itoa(n)
		tools = append(tools, peer("pouchdb-replicate pool "+pool+" batch "+bs, "pool-replicate.js", "--pool", pool, "--batch-size", bs))
	}
	if couch {
		tools = append(tools,
			peer("couch-replicate per db (pool "+one+")", "couch-pool-replicate.js", "--pool", one),
			peer("couch-replicate pool "+pool, "couch-pool-replicate.js", "--pool", pool))
		for _, p := range e.cfg.couchRepSweep {
			tools = append(tools, peer("couch-replicate pool "+pool+" "+p.String(), "couch-pool-replicate.js",
				"--pool", pool, "--workers", strconv.Itoa(p[0]), "--connections", strconv.Itoa(p[1])))
		}
	}
	bound := func(name string, args ...string) realTool {
		return realTool{name: name, bound: true, run: func(src, tgt *server, b record) record {
			if src.pid > 0 && tgt.pid > 0 {
				args = append(args, "--pids", fmt.Sprintf("%d,%d", src.pid, tgt.pid))
			}
			n, a := e.node("bound-server.js", append([]string{src.URL, tgt.URL}, args...)...)
			r, o := e.runTool(ctx, b, []*server{src, tgt}, n, a...)
			pr := applyPeer(&r, o)
			r.TimeMS = int64(pr.MS)
			r.Note = "time = the timed part only (reading the source and creating the target's databases are untimed)"
			var timed struct {
				DstCPU *int64 `json:"timed_dst_cpu_ms"`
			}
			if o.lastJSON(&timed) == nil && timed.DstCPU != nil {
				r.Extra = map[string]any{timedTargetCPU: *timed.DstCPU}
			}
			return r
		}}
	}
	ingest := append(append(pairList{}, e.cfg.boundSweep...), serverIngestWide...)
	for _, p := range ingest {
		tools = append(tools, bound("bound-ingest "+p.String(), "ingest", strconv.Itoa(p[0]), strconv.Itoa(p[1])))
	}
	// PouchDB Server gives no multipart answer to PUT back as it is.
	for _, p := range ingest {
		if couch {
			tools = append(tools, bound("bound-ingest-multipart "+p.String(), "ingest", strconv.Itoa(p[0]), strconv.Itoa(p[1]), "--multipart"))
		}
	}
	for _, p := range e.cfg.copyBound {
		for _, d := range serverCopyDBs {
			tools = append(tools, bound(fmt.Sprintf("bound-copy %s x %d dbs", p, d), "copy", strconv.Itoa(p[0]), strconv.Itoa(p[1]), "--dbs", strconv.Itoa(d)))
		}
	}
	kept := tools[:0]
	for _, t := range tools {
		if e.cfg.wants(t.name) {
			kept = append(kept, t)
		}
	}
	return kept
}

// replicateReal copies the real-data set (many databases) whole server
// with sofa, PouchDB's and (on CouchDB) CouchDB's replicator database by
// database, and the whole-server bounds; one run each, every copy checked
// by the test oracle.
func (e *env) replicateReal(ctx context.Context) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	dbs, err := dataset.Real(e.root+"/node_modules", dataset.Options{Scale: e.cfg.realScale})
	if err != nil {
		return err
	}
	if err := e.load(ctx, src.URL, dbs, 4); err != nil {
		return err
	}
	base := record{Bench: "replicate", Case: fmt.Sprintf("real data, scale %g (%d dbs)", e.cfg.realScale, len(dbs))}
	t := &table{title: "replicate: " + base.Case + ", whole server",
		head: append([]string{"tool"}, append(usageHead, "requests", "verify")...)}
	times := map[string]int64{}
	recs := map[string]record{}
	tools := e.realTools(ctx, src.couch())
	// the work floor's reads: the source alone, no copy to check
	var reads []record
	names := make([]string, len(dbs))
	for i, db := range dbs {
		names[i] = db.Name
	}
	for _, v := range []struct{ tool, flag string }{{"bound-read", ""}, {"bound-read-multipart", "-multipart"}} {
		if !e.cfg.wants(v.tool) {
			continue
		}
		b := base
		b.Tool = v.tool
		var flags []string
		if v.flag != "" {
			flags = append(flags, v.flag)
		}
		r := e.readBound(ctx, src, b, names, flags...)
		e.logf("replicate: real data %s: %s in %s", v.tool, status(r), secs(r.TimeMS))
		t.add(append(append([]string{r.Tool}, usageRow(r)...), "-", "(reads only)")...)
		reads = append(reads, r)
	}
	for _, tl := range tools {
		b := base
		b.Tool = tl.name
		r, err := e.runFresh(ctx, func(tgt *server) record { return tl.run(src, tgt, b) }, src.URL, "", true)
		if err != nil {
			return err
		}
		e.sink.write(r)
		e.logf("replicate: real data %s: %s in %s", tl.name, status(r), secs(r.TimeMS))
		times[tl.name], recs[tl.name] = okTime(r), r
		t.add(append(append([]string{r.Tool}, usageRow(r)...), reqCell(r.Requests), firstNonEmpty(r.Verify, "-"))...)
	}
	best := func(prefix string) (int64, string) {
		var ms int64
		var name string
		for _, tl := range tools {
			if v := times[tl.name]; strings.HasPrefix(tl.name, prefix) && v > 0 && (ms == 0 || v < ms) {
				ms, name = v, tl.name
			}
		}
		return ms, name
	}
	sofa := times["sofa"]
	pouch, pouchName := best("pouchdb-replicate")
	ingest, ingestName := best("bound-ingest")
	copyB, copyName := best("bound-copy")
	t.note("sofa/ingest bound = %s (best: %s)%s", ratio(sofa, ingest), ingestName, beaten(sofa, ingest))
	t.note("sofa/copy bound   = %s (best: %s)%s", check(ratio(sofa, copyB), sofa, copyB, "<=", 1.2), copyName, beaten(sofa, copyB))
	work := newWorkFloor(reads, recs, "bound-ingest")
	t.note("%s", work.describe("sofa", recs["sofa"].ServerCPUMS))
	t.note("pouchdb/sofa      = %s (PouchDB's replicator at its best: %s)", check(ratio(pouch, sofa), pouch, sofa, ">=", 3), pouchName)
	if src.couch() {
		crep, crepName := best("couch-replicate")
		t.note("couch/sofa        = %s (CouchDB's replicator at its best: %s)", check(ratio(crep, sofa), crep, sofa, ">=", 5), crepName)
		if crep > 0 && copyB > 0 && ingest > 0 {
			t.note("  5x CouchDB's best would be %s s, against the copy bound %s s, the ingest bound %s s and the servers' work floor %s s: %s",
				secs(crep/5), secs(copyB), secs(ingest), secs(work.ms()), fiveXReach(crep/5, ingest, copyB, cpuFloor(recs[copyName]), sofa, work, recs["sofa"].ServerCPUMS))
		}
	}
	t.note("sofa's time is its whole process: start-up, creating the target's databases, their _security and _revs_limit, and its per-database doc-count check (--verify cheap, the default); the bounds' time is their timed part only (the target's databases created untimed, no _security)")
	t.note("bounds (bench/bound-server.js): ingest = pre-built _bulk_docs new_edits=false bodies of every database, batch/parallel as named across the server (-multipart: a revision with attachments is its own multipart/related PUT, raw bytes instead of base64); copy = per database the plain feed, _bulk_get and _bulk_docs pipelined (batch/pages in flight), so many databases at a time")
	t.print(os.Stdout)
	e.stopServer(src)
	return nil
}

// beaten flags a bound that sofa's whole run beat (sofa < bound, ms): it
// is then no bound for this data (its way of writing costs the server
// more than sofa's), and no target is out of reach because of it.
func beaten(sofa, bound int64) string {
	if sofa > 0 && bound > 0 && sofa < bound {
		return ": sofa beats it, so it bounds nothing here"
	}
	return ""
}
