package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/internal/dataset"
)

// benchReplicate: one database of cfg.docs documents, PouchDB Server to
// PouchDB Server, sofa vs PouchDB's replicator vs the bound (the target's
// raw _bulk_docs ingest of the same revisions), cfg.runs interleaved runs
// each into a fresh target server; then the real-data set, whole server.
func benchReplicate(ctx context.Context, e *env) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	const db = "bench"
	if err := e.load(ctx, src.URL, []dataset.DB{dataset.Synth{Name: db, Docs: e.cfg.docs, MinSize: e.cfg.docSize, Seed: 1}.DB()}, 1); err != nil {
		return err
	}
	base := record{Bench: "replicate", Case: fmt.Sprintf("%d docs x %d B", e.cfg.docs, e.cfg.docSize)}
	if src.couch() {
		base.Case += " on CouchDB"
	}
	srcDB := src.URL + "/" + db
	type tool struct {
		name string
		run  func(tgt *server, b record) record
	}
	tools := []tool{
		{"sofa", func(tgt *server, b record) record {
			r, o := e.runTool(ctx, b, []*server{src, tgt}, e.sofa, "replicate", srcDB, tgt.URL+"/"+db, "--create-target", "--json")
			applySofa(&r, o)
			return r
		}},
		{"pouchdb-replicate", func(tgt *server, b record) record {
			name, args := e.node("pouchdb-replicate.js", srcDB, tgt.URL+"/"+db)
			r, o := e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			applyPeer(&r, o)
			return r
		}},
	}
	if e.cfg.sofaAlt != "" {
		tools = append(tools, tool{"sofa-alt", func(tgt *server, b record) record {
			r, o := e.runTool(ctx, b, []*server{src, tgt}, e.cfg.sofaAlt, "replicate", srcDB, tgt.URL+"/"+db, "--create-target", "--json")
			applySofa(&r, o)
			r.Note = "sofa binary " + e.cfg.sofaAlt
			return r
		}})
	}
	for _, v := range strings.Split(e.cfg.sofaVariants, ";") {
		extra := strings.Fields(v)
		if len(extra) == 0 {
			continue
		}
		tools = append(tools, tool{"sofa " + strings.Join(extra, " "), func(tgt *server, b record) record {
			args := append([]string{"replicate", srcDB, tgt.URL + "/" + db, "--create-target", "--json"}, extra...)
			r, o := e.runTool(ctx, b, []*server{src, tgt}, e.sofa, args...)
			applySofa(&r, o)
			return r
		}})
	}
	for _, n := range e.cfg.pouchBatches {
		bs := strconv.Itoa(n)
		tools = append(tools, tool{"pouchdb-replicate batch " + bs, func(tgt *server, b record) record {
			name, args := e.node("pouchdb-replicate.js", srcDB, tgt.URL+"/"+db, bs)
			r, o := e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			applyPeer(&r, o)
			return r
		}})
	}
	if src.couch() {
		couchRep := func(name string, extra ...string) tool {
			return tool{name, func(tgt *server, b record) record {
				name, args := e.node("couch-replicate.js", append([]string{srcDB, tgt.URL + "/" + db}, extra...)...)
				r, o := e.runTool(ctx, b, []*server{src, tgt}, name, args...)
				applyPeer(&r, o)
				r.Note = "POST /_replicate on the target server (non-continuous: answers when done)"
				return r
			}}
		}
		tools = append(tools, couchRep("couch-replicate"))
		for _, p := range e.cfg.couchRepSweep {
			tools = append(tools, couchRep("couch-replicate "+p.String(), strconv.Itoa(p[0]), strconv.Itoa(p[1])))
		}
	}
	boundTool := func(script, prefix string, p pair, note string, extra ...string) tool {
		return tool{prefix + " " + p.String(), func(tgt *server, b record) record {
			name, args := e.node(script, append([]string{srcDB, tgt.URL + "/" + db, strconv.Itoa(p[0]), strconv.Itoa(p[1])}, extra...)...)
			r, o := e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			pr := applyPeer(&r, o)
			r.TimeMS = int64(pr.MS)
			r.Note = note
			return r
		}}
	}
	for _, p := range e.cfg.boundSweep {
		tools = append(tools, boundTool("bound-bulkdocs.js", "bound-bulkdocs", p,
			"time = timed _bulk_docs ingest (batch/parallel as named); cpu/rss include the untimed preparation"))
	}
	for _, p := range e.cfg.copyBound {
		tools = append(tools, boundTool("bound-copy.js", "bound-copy", p,
			"time = timed copy (_changes pages, _bulk_get + _bulk_docs new_edits=false per page, batch/parallel as named); the target's creation is untimed"))
		tools = append(tools, boundTool("bound-copy.js", "bound-copy-inline", p,
			"time = timed copy (_changes?include_docs=true pages, _bulk_docs new_edits=false per page, batch/parallel as named): the inline-feed pipeline, for choosing couch.Caps.InlineDocsUpTo", "--inline"))
	}
	kept := tools[:0]
	for _, t := range tools {
		if e.cfg.wants(t.name) {
			kept = append(kept, t)
		}
	}
	tools = kept
	byTool := map[string][]record{}
	for run := 1; run <= e.cfg.runs; run++ {
		for _, t := range tools {
			b := base
			b.Tool, b.Run = t.name, run
			r, err := e.runFresh(ctx, func(tgt *server) record { return t.run(tgt, b) }, srcDB, "/"+db, false)
			if err != nil {
				return err
			}
			e.sink.write(r)
			e.logf("replicate: run %d %s: %s in %s", run, t.name, status(r), secs(r.TimeMS))
			byTool[t.name] = append(byTool[t.name], r)
		}
	}
	t := &table{title: fmt.Sprintf("replicate: %s, %s -> %s (median of %d runs)", base.Case, kindName(src), kindName(src), e.cfg.runs),
		head: append([]string{"tool"}, append(usageHead, "requests", "verify")...)}
	med := map[string]record{}
	for _, tl := range tools {
		m := median(byTool[tl.name])
		med[tl.name] = m
		e.sink.write(m)
		t.add(append(append([]string{tl.name}, usageRow(m)...), reqCell(m.Requests), firstNonEmpty(byTool[tl.name][0].Verify, "-"))...)
	}
	// best is the fastest successful median among the tools named
	// prefix (exactly, or prefix + " " + a setting).
	best := func(prefix string) (int64, string) {
		var ms int64
		var name string
		for _, tl := range tools {
			if tl.name != prefix && !strings.HasPrefix(tl.name, prefix+" ") {
				continue
			}
			if v := okTime(med[tl.name]); v > 0 && (ms == 0 || v < ms) {
				ms, name = v, tl.name
			}
		}
		return ms, name
	}
	sofa := okTime(med["sofa"])
	pouch, pouchName := best("pouchdb-replicate")
	bound, boundName := best("bound-bulkdocs")
	cbound, cboundName := best("bound-copy")
	ibound, iboundName := best("bound-copy-inline")
	t.note("sofa/ingest bound = %s (best: %s)", check(ratio(sofa, bound), sofa, bound, "<=", 1.5), boundName)
	if src.couch() {
		t.note("sofa/copy bound   = %s (%s)", check(ratio(sofa, cbound), sofa, cbound, "<=", 1.2), cboundName)
		crep, crepName := best("couch-replicate")
		t.note("couch/sofa        = %s (CouchDB's replicator at its best: %s)", check(ratio(crep, sofa), crep, sofa, ">=", 5), crepName)
		if crep > 0 && cbound > 0 && bound > 0 {
			t.note("  5x CouchDB's best would be %s s, against the copy bound %s s and the ingest bound %s s: %s",
				secs(crep/5), secs(cbound), secs(bound), fiveXReach(crep/5, bound, cbound, cpuFloor(med[cboundName]), sofa, workFloor{}, 0))
		}
		t.note("pouchdb/sofa      = %s (PouchDB's replicator at its best: %s)", check(ratio(pouch, sofa), pouch, sofa, ">=", 3), pouchName)
	} else {
		t.note("sofa/copy bound   = %s (%s)", ratio(sofa, cbound), cboundName)
		t.note("pouchdb/sofa      = %s (PouchDB's replicator at its best: %s)", check(ratio(pouch, sofa), pouch, sofa, ">=", 3), pouchName)
	}
	t.note("inline/plain copy = %s (%s vs %s: > 1 means the plain feed + _bulk_get pipeline is faster on this server)", ratio(ibound, cbound), iboundName, cboundName)
	var work []string
	for _, tl := range tools {
		if m := med[tl.name]; m.ServerReductions > 0 {
			work = append(work, fmt.Sprintf("%s %.0f", tl.name, float64(m.ServerReductions)/1e6))
		}
	}
	if len(work) > 0 {
		t.note("both servers' work in millions of Erlang reductions (load-independent; medians): %s", strings.Join(work, ", "))
	}
	t.note("bound times are their timed part only; server cpu = both servers; verify = the test oracle (internal/couchtest.CompareDBs)")
	t.print(os.Stdout)
	e.stopServer(src)
	return nil
}

// fiveXReach says where 5x CouchDB's best time (five, ms) stands against
// the ingest bound, the servers' work floor (work, zero when not
// measured; sofaCPU is sofa's servers' CPU ms in the same run), the
// servers' CPU for the copy bound's requests (floor, 0 when not
// measured) and the copy bound; sofa is sofa's time. A copy bound that
// sofa beat (its requests cost the servers more than sofa's) stops
// nothing, nor does its CPU; nor does a work floor whose CPU sofa's
// servers undercut.
func fiveXReach(five, ingest, copyB, floor, sofa int64, work workFloor, sofaCPU int64) string {
	sofaCopy := ratio(sofa, copyB)
	switch {
	case five < ingest:
		return "out of reach: below the ingest bound, the target's storing alone"
	case work.ms() > 0 && five < work.ms() && !work.beatenBy(sofaCPU):
		return fmt.Sprintf("out of reach: below the servers' work floor (%s s: the CPU the cheapest measured read and store of the same revisions cost the two servers, on the %d cores they share)", secs(work.ms()), work.cores)
	case sofa > 0 && sofa < copyB:
		floorSays := ""
		if work.ms() > 0 {
			floorSays = fmt.Sprintf(", %s x the servers' work floor", ratio(five, work.ms()))
			if work.beatenBy(sofaCPU) {
				floorSays += " (which sofa's servers undercut)"
			}
		}
		return fmt.Sprintf("not stopped by a bound: %s x the ingest bound%s; the copy bound's way of copying costs more than sofa's (sofa / copy bound %s), so neither it nor its servers' CPU bounds anything here", ratio(five, ingest), floorSays, sofaCopy)
	case floor > 0 && five < floor:
		return fmt.Sprintf("out of reach: below %s s, the two servers' CPU for the copy bound's requests (the changes feed, _bulk_get, _bulk_docs: what any copy asks) on the %d cores they share", secs(floor), runtime.NumCPU())
	case five < copyB:
		return fmt.Sprintf("below the copy bound (the plainest copy of the same revisions; sofa / copy bound %s) and %s x the ingest bound, which reads nothing from the source", sofaCopy, ratio(five, ingest))
	}
	return "above both"
}

// benchReplicateAll runs the one-database case (unless -docs is 0) and
// then the real-data set, whole server (unless skipped).
func benchReplicateAll(ctx context.Context, e *env) error {
	if e.cfg.docs > 0 {
		if err := benchReplicate(ctx, e); err != nil {
			return err
		}
	}
	if e.cfg.skipReal || e.cfg.realScale <= 0 {
		return nil
	}
	return e.replicateReal(ctx)
}

// runFresh runs one tool into a newly started target server, checks its
// copy against srcURL (the target's URL + path) with the test oracle
// (every user database when all) and stops the target.
func (e *env) runFresh(ctx context.Context, run func(tgt *server) record, srcURL, path string, all bool) (record, error) {
	if err := ctx.Err(); err != nil {
		return record{}, err
	}
	tgt, err := e.startServer(ctx)
	if err != nil {
		return record{}, err
	}
	defer e.stopServer(tgt)
	r := run(tgt)
	if r.OK {
		r.Verify = e.oracle(ctx, srcURL, tgt.URL+path, all, !tgt.couch())
		r.OK = r.Verify == "equal"
	}
	return r, nil
}

// okTime is r.TimeMS when r succeeded, else 0 (no ratio).
func okTime(r record) int64 {
	if !r.OK {
		return 0
	}
	return r.TimeMS
}

func reqCell(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// kindName is the display name of s's kind.
func kindName(s *server) string {
	if s.couch() {
		return "CouchDB"
	}
	return "PouchDB Server"
}

// cpuFloor is the time the servers' CPU of a bound's run (both servers,
// its untimed preparation included) takes on the machine's cores, in ms
// (0 when not measured): the servers serve its requests on cores they
// share, so no run making the same requests ends sooner here.
func cpuFloor(r record) int64 {
	if r.ServerCPUMS <= 0 {
		return 0
	}
	return r.ServerCPUMS / int64(runtime.NumCPU())
}
