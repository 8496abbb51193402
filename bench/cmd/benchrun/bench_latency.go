package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sofadb/sofa/internal/dataset"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// benchLatency: the replicate copy with both servers behind a fault proxy
// that adds cfg.latency to every request (a source and a target far from
// the client): sofa vs PouchDB's replicator through the same proxies.
func benchLatency(ctx context.Context, e *env) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	const db = "bench"
	if err := e.load(ctx, src.URL, []dataset.DB{dataset.Synth{Name: db, Docs: e.cfg.docs, MinSize: e.cfg.docSize, Seed: 1}.DB()}, 1); err != nil {
		return err
	}
	psrc, err := startProxy(src, e.cfg.latency, faultproxy.Limits{})
	if err != nil {
		return err
	}
	defer psrc.Stop()
	base := record{Bench: "latency", Case: fmt.Sprintf("%d docs x %d B, +%s per request", e.cfg.docs, e.cfg.docSize, e.cfg.latency)}
	tools := []string{"sofa", "pouchdb-replicate"}
	byTool := map[string][]record{}
	for run := 1; run <= e.cfg.latencyRuns; run++ {
		for _, tool := range tools {
			tgt, err := e.startServer(ctx)
			if err != nil {
				return err
			}
			ptgt, err := startProxy(tgt, e.cfg.latency, faultproxy.Limits{})
			if err != nil {
				return err
			}
			psrc.ResetStats()
			b := base
			b.Tool, b.Run = tool, run
			from, to := psrc.URL+"/"+db, ptgt.URL+"/"+db
			var r record
			if tool == "sofa" {
				var o *outcome
				r, o = e.runTool(ctx, b, []*server{src, tgt}, e.sofa, "replicate", from, to, "--create-target", "--json")
				applySofa(&r, o)
			} else {
				name, args := e.node("pouchdb-replicate.js", from, to)
				var o *outcome
				r, o = e.runTool(ctx, b, []*server{src, tgt}, name, args...)
				applyPeer(&r, o)
			}
			r.Requests, r.Throttled = proxies{psrc, ptgt}.totals()
			ptgt.Stop()
			if r.OK {
				r.Verify = e.oracle(ctx, src.URL+"/"+db, tgt.URL+"/"+db, false, !tgt.couch())
				r.OK = r.Verify == "equal"
			}
			e.sink.write(r)
			e.logf("latency: run %d %s: %s in %s", run, tool, status(r), secs(r.TimeMS))
			byTool[tool] = append(byTool[tool], r)
			e.stopServer(tgt)
		}
	}
	t := &table{title: "latency: " + base.Case + " (both servers behind the proxy)",
		head: append([]string{"tool"}, append(usageHead, "requests", "verify")...)}
	med := map[string]record{}
	for _, tool := range tools {
		m := byTool[tool][0]
		if len(byTool[tool]) > 1 {
			m = median(byTool[tool])
			e.sink.write(m)
		}
		med[tool] = m
		t.add(append(append([]string{tool}, usageRow(m)...), reqCell(m.Requests), firstNonEmpty(byTool[tool][0].Verify, "-"))...)
	}
	s, p := okTime(med["sofa"]), okTime(med["pouchdb-replicate"])
	t.note("pouchdb/sofa   = %s", check(ratio(p, s), p, s, ">=", 5))
	t.note("requests = requests through both proxies; each waited %s before being forwarded", e.cfg.latency)
	t.print(os.Stdout)
	return nil
}
