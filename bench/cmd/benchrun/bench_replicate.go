package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

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
		{"bound-bulkdocs", func(tgt *server, b record) record {
			name, args := e.node("bound-bulkdocs.js", srcDB, tgt.URL+"/"+db, "500", "4")
			r, o := e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			p := applyPeer(&r, o)
			r.TimeMS = int64(p.MS) // the timed ingest only, not the preparation
			r.Note = "time = timed _bulk_docs ingest (500 revisions per request, 4 in flight); cpu/rss include the untimed preparation"
			return r
		}},
	}
	byTool := map[string][]record{}
	for run := 1; run <= e.cfg.runs; run++ {
		for _, t := range tools {
			if err := ctx.Err(); err != nil {
				return err
			}
			tgt, err := e.startServer(ctx)
			if err != nil {
				return err
			}
			b := base
			b.Tool, b.Run = t.name, run
			r := t.run(tgt, b)
			if r.OK {
				r.Verify = e.verify(ctx, srcDB, tgt.URL+"/"+db, false)
				r.OK = r.Verify == "equal"
			}
			e.sink.write(r)
			e.logf("replicate: run %d %s: %s in %s", run, t.name, status(r), secs(r.TimeMS))
			byTool[t.name] = append(byTool[t.name], r)
			e.stopServer(tgt)
		}
	}
	t := &table{title: fmt.Sprintf("replicate: %s, PouchDB Server -> PouchDB Server (median of %d runs)", base.Case, e.cfg.runs),
		head: append([]string{"tool"}, append(usageHead, "requests", "verify")...)}
	med := map[string]record{}
	for _, tl := range tools {
		m := median(byTool[tl.name])
		med[tl.name] = m
		e.sink.write(m)
		t.add(append(append([]string{tl.name}, usageRow(m)...), reqCell(m.Requests), firstNonEmpty(byTool[tl.name][0].Verify, "-"))...)
	}
	sofa, pouch, bound := okTime(med["sofa"]), okTime(med["pouchdb-replicate"]), okTime(med["bound-bulkdocs"])
	t.note("sofa/bound     = %s", check(ratio(sofa, bound), sofa, bound, "<=", 1.5))
	t.note("pouchdb/sofa   = %s", check(ratio(pouch, sofa), pouch, sofa, ">=", 3))
	t.note("time of the bound is its timed _bulk_docs ingest only; server cpu = both PouchDB Servers")
	t.print(os.Stdout)
	e.stopServer(src)

	if e.cfg.skipReal || e.cfg.realScale <= 0 {
		return nil
	}
	return e.replicateReal(ctx)
}

// replicateReal copies the real-data set (many databases) whole-server
// with sofa and database by database with PouchDB's replicator.
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
	pool := strconv.Itoa(e.cfg.realPouchP)
	var times = map[string]int64{}
	for _, tool := range []string{"sofa", "pool-replicate"} {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return err
		}
		b := base
		b.Tool = tool
		var r record
		if tool == "sofa" {
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, e.sofa, "replicate", src.URL, tgt.URL, "--json")
			applySofa(&r, o)
		} else {
			b.Tool = "pouchdb-replicate per db (pool " + pool + ")"
			name, args := e.node("pool-replicate.js", src.URL, tgt.URL, "--pool", pool)
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			applyPeer(&r, o)
		}
		if r.OK {
			r.Verify = e.verify(ctx, src.URL, tgt.URL, true)
			r.OK = r.Verify == "equal"
		}
		e.sink.write(r)
		times[tool] = okTime(r)
		t.add(append(append([]string{r.Tool}, usageRow(r)...), reqCell(r.Requests), firstNonEmpty(r.Verify, "-"))...)
		e.stopServer(tgt)
	}
	t.note("pouchdb/sofa   = %s", check(ratio(times["pool-replicate"], times["sofa"]), times["pool-replicate"], times["sofa"], ">=", 3))
	t.note("sofa's time includes its own per-database doc-count check (--verify cheap, the default)")
	t.print(os.Stdout)
	e.stopServer(src)
	return nil
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
