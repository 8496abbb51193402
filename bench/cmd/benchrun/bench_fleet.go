package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
)

// benchFleet: many small databases, whole server: sofa vs PouchDB's
// replicator over a fixed pool of cfg.pool databases (coucharchive's
// design), for cfg.fleetDBs databases of one document and cfg.fleetBigDBs
// databases of cfg.fleetBigDoc documents. Also sofa's requests per
// database and the bound they imply at the server's measured request rate.
func benchFleet(ctx context.Context, e *env) error {
	cases := []struct{ dbs, docs int }{{e.cfg.fleetDBs, 1}}
	if e.cfg.fleetBigDBs > 0 {
		cases = append(cases, struct{ dbs, docs int }{e.cfg.fleetBigDBs, e.cfg.fleetBigDoc})
	}
	for _, c := range cases {
		if err := e.fleetCase(ctx, c.dbs, c.docs); err != nil {
			return err
		}
		e.stopServers()
	}
	return nil
}

func (e *env) fleetCase(ctx context.Context, nDBs, docs int) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	if err := e.load(ctx, src.URL, synthDBs("fleet", nDBs, docs, 256), 8); err != nil {
		return err
	}
	// The server's rate of cheap requests, the ceiling on requests/s.
	rate, err := requestRate(ctx, src.URL+"/fleet-0000", 16, e.cfg.rateProbe)
	if err != nil {
		return err
	}
	base := record{Bench: "fleet", Case: fmt.Sprintf("%d dbs x %d docs of 256 B", nDBs, docs)}
	t := &table{title: "fleet: " + base.Case + ", whole server",
		head: append([]string{"tool"}, append(usageHead, "requests", "req/db", "verify")...)}
	pool := strconv.Itoa(e.cfg.pool)
	times := map[string]int64{}
	var sofaRes *sofaResult
	for _, tool := range []string{"sofa", "pool"} {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return err
		}
		b := base
		var r record
		if tool == "sofa" {
			b.Tool = "sofa"
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, e.sofa, "replicate", src.URL, tgt.URL, "--json")
			sofaRes = applySofa(&r, o)
		} else {
			b.Tool = "pouchdb-replicate pool " + pool
			name, args := e.node("pool-replicate.js", src.URL, tgt.URL, "--pool", pool)
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			applyPeer(&r, o)
		}
		if r.OK {
			r.Verify = e.verify(ctx, src.URL, tgt.URL, false)
			r.OK = r.Verify == "equal"
		}
		perDB := "-"
		if r.Requests > 0 {
			perDB = fmt.Sprintf("%.1f", float64(r.Requests)/float64(nDBs))
		}
		r.Extra = map[string]any{"server_rate_rps": rate}
		e.sink.write(r)
		times[tool] = okTime(r)
		t.add(append(append([]string{r.Tool}, usageRow(r)...), reqCell(r.Requests), perDB, firstNonEmpty(r.Verify, "-"))...)
		e.stopServer(tgt)
	}
	t.note("pool/sofa      = %s", check(ratio(times["pool"], times["sofa"]), times["pool"], times["sofa"], ">=", 3))
	if sofaRes != nil && rate > 0 {
		// Each server is one single-threaded node process: the busier
		// one bounds the run at its request rate.
		var busiest int64
		for _, h := range sofaRes.Hosts {
			t.note("sofa requests on %s: %d (%.1f per db), limit peak %d", h.Host, h.Requests, float64(h.Requests)/float64(nDBs), h.MaxLimit)
			busiest = max(busiest, h.Requests)
		}
		boundMS := int64(float64(busiest) / rate * 1000)
		t.note("server request rate (GET /db, 16 in flight): %.0f req/s -> request-rate bound = %d requests on the busier server / rate = %s s", rate, busiest, secs(boundMS))
		t.note("sofa/bound     = %s (peak databases in flight %d)", ratio(times["sofa"], boundMS), sofaRes.Concurrency.Peak)
		e.sink.write(record{Bench: "fleet", Case: base.Case, Tool: "request-rate bound", OK: true, TimeMS: boundMS,
			Requests: busiest, Extra: map[string]any{"server_rate_rps": rate}})
	}
	t.print(os.Stdout)
	return nil
}
