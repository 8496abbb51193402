package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// benchFleet: many small databases, whole server: sofa vs PouchDB's
// replicator over a fixed pool of cfg.pool databases (coucharchive's
// design), for cfg.fleetDBs databases of one document and cfg.fleetBigDBs
// databases of cfg.fleetBigDoc documents. Also sofa's requests per
// database and the bound they imply at the servers' measured rate of each
// kind of request (bound.go).
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

// fleetDocSize is the body size in bytes of every fleet document.
const fleetDocSize = 256

func (e *env) fleetCase(ctx context.Context, nDBs, docs int) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	if err := e.load(ctx, src.URL, synthDBs("fleet", nDBs, docs, fleetDocSize), 8); err != nil {
		return err
	}
	// The server's rate of cheap requests (GET /db), for the records.
	rate, _, err := requestRate(ctx, boundInFlight, e.cfg.rateProbe, 0, func(ctx context.Context, _ int) (*http.Request, error) {
		return newRequest(ctx, http.MethodGet, src.URL+"/fleet-0000", nil)
	})
	if err != nil {
		return fmt.Errorf("request rate probe: %w", err)
	}
	base := record{Bench: "fleet", Case: fmt.Sprintf("%d dbs x %d docs of %d B", nDBs, docs, fleetDocSize)}
	runs := max(e.cfg.fleetRuns, 1)
	var all []fleetRun
	for run := 1; run <= runs; run++ {
		b := base
		if runs > 1 {
			b.Run = run
		}
		fr, err := e.fleetRunOnce(ctx, b, src, nDBs, docs, rate, run)
		if err != nil {
			return err
		}
		all = append(all, fr)
	}
	if runs > 1 {
		printFleetMedians(base.Case, all, src.couch(), e.cfg.pool, fleetVariants(e.cfg.sofaVariants))
	}
	if e.cfg.wants("sofa restore") {
		return e.fleetRestore(ctx, base, src, nDBs, all[len(all)-1].tgtBound)
	}
	return nil
}

// fleetRun is what one run of a fleet case measured: each tool's time in
// ms (0: failed) and sofa's ratios to the needed-requests bounds of the
// same run (0: not measured).
type fleetRun struct {
	times      map[string]int64
	bare, full float64 // sofa / needed-requests bound, bare and full fidelity
	tgtBound   float64 // the target's part of the bare bound, seconds
}

// fleetRunOnce runs every tool of a fleet case once, in runOrder's order
// for run, each into a fresh target, then the bounds of sofa's run.
func (e *env) fleetRunOnce(ctx context.Context, base record, src *server, nDBs, docs int, rate float64, run int) (fleetRun, error) {
	title := "fleet: " + base.Case + ", whole server"
	if base.Run > 0 {
		title += fmt.Sprintf(", run %d", base.Run)
	}
	t := &table{title: title, head: append([]string{"tool"}, append(usageHead, "requests", "req/db", "verify")...)}
	pool := strconv.Itoa(e.cfg.pool)
	fr := fleetRun{times: map[string]int64{}}
	times := fr.times
	var sofaRes *sofaResult
	var sofaOut *outcome
	names := map[string]string{"sofa": "sofa", "sofa-alt": "sofa-alt",
		"pool": "pouchdb-replicate pool " + pool, "couch-pool": "couch-replicate pool " + pool}
	var tools []string
	for _, tool := range []string{"sofa", "sofa-alt", "pool", "couch-pool"} {
		if tool == "sofa-alt" && e.cfg.sofaAlt == "" || tool == "couch-pool" && !src.couch() || !e.cfg.wants(names[tool]) {
			continue
		}
		tools = append(tools, tool)
	}
	if e.cfg.wants("sofa") {
		tools = append(tools, fleetVariants(e.cfg.sofaVariants)...)
	}
	for _, tool := range runOrder(tools, run) {
		tgt, err := e.startServer(ctx)
		if err != nil {
			return fr, err
		}
		b := base
		var r record
		if tool == "sofa" {
			b.Tool = "sofa"
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, e.sofa, "replicate", src.URL, tgt.URL, "--json")
			sofaRes, sofaOut = applySofa(&r, o), o
		} else if tool == "sofa-alt" {
			b.Tool = "sofa-alt"
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, e.cfg.sofaAlt, "replicate", src.URL, tgt.URL, "--json")
			applySofa(&r, o)
			r.Note = "sofa binary " + e.cfg.sofaAlt
		} else if extra, ok := strings.CutPrefix(tool, "sofa "); ok {
			b.Tool = tool
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, e.sofa, append([]string{"replicate", src.URL, tgt.URL, "--json"}, strings.Fields(extra)...)...)
			applySofa(&r, o)
		} else if tool == "pool" {
			b.Tool = "pouchdb-replicate pool " + pool
			name, args := e.node("pool-replicate.js", src.URL, tgt.URL, "--pool", pool)
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			applyPeer(&r, o)
		} else {
			b.Tool = "couch-replicate pool " + pool
			name, args := e.node("couch-pool-replicate.js", src.URL, tgt.URL, "--pool", pool)
			var o *outcome
			r, o = e.runTool(ctx, b, []*server{src, tgt}, name, args...)
			applyPeer(&r, o)
			r.Note = "CouchDB's replicator: POST /_replicate per database on the target server, pool databases at a time"
		}
		if r.OK {
			r.Verify = e.oracle(ctx, src.URL, tgt.URL, true, !tgt.couch())
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
	if _, ok := times["sofa-alt"]; ok {
		t.note("sofa-alt/sofa  = %s (another sofa binary, same run)", ratio(times["sofa-alt"], times["sofa"]))
	}
	for _, v := range fleetVariants(e.cfg.sofaVariants) {
		if _, ok := times[v]; ok {
			t.note("%s / sofa = %s (same run)", v, ratio(times[v], times["sofa"]))
		}
	}
	t.note("pool/sofa      = %s", check(ratio(times["pool"], times["sofa"]), times["pool"], times["sofa"], ">=", 3))
	if src.couch() {
		t.note("couch pool/sofa = %s (CouchDB's replicator, %s databases at a time)", check(ratio(times["couch-pool"], times["sofa"]), times["couch-pool"], times["sofa"], ">=", 3), pool)
	}
	if sofaRes != nil {
		for _, h := range sofaRes.Hosts {
			t.note("sofa requests on %s: %d (%.1f per db), limit peak %d", h.Host, h.Requests, float64(h.Requests)/float64(nDBs), h.MaxLimit)
		}
	}
	t.print(os.Stdout)
	if sofaRes != nil {
		var err error
		if fr, err = e.fleetBound(ctx, base, src, nDBs, docs, sofaOut, fr, sofaRes.Concurrency.Peak, rate); err != nil {
			return fr, err
		}
	}
	return fr, nil
}

// fleetBound measures and prints the request-rate bound of sofa's run (see
// bound.go) and records it as tool "request-rate bound". A failed
// measurement is printed and recorded, not returned: only a cancelled ctx
// is. It returns fr with sofa's ratios to the needed-requests bounds and
// the target's part of the bare one in seconds (0 when not measured), the
// bound of a whole-server restore.
func (e *env) fleetBound(ctx context.Context, base record, src *server, nDBs, docs int, sofaOut *outcome, fr fleetRun, peak int, getRate float64) (fleetRun, error) {
	sofaMS := fr.times["sofa"]
	rec := base
	rec.Tool = "request-rate bound"
	rec.Extra = map[string]any{"server_rate_rps": getRate}
	title := "fleet: " + base.Case + ", request-rate bound"
	kinds, err := sofaKinds(sofaOut)
	var b *bound
	if err == nil {
		rec.Extra["requests_by_kind"] = kinds
		b, err = e.requestBound(ctx, boundCase{nDBs: nDBs, docs: docs, docSize: fleetDocSize, srcURL: src.URL, srcServer: src, inlineDocs: !src.couch() || docs <= 100, // couch.Caps.InlineDocsUpTo
			srcDB: func(i int) string { return fmt.Sprintf("fleet-%04d", i) }, kinds: kinds})
	}
	if err != nil {
		if ctx.Err() != nil {
			return fr, ctx.Err()
		}
		rec.Error = err.Error()
		e.sink.write(rec)
		fmt.Fprintf(os.Stdout, "\n== %s\n  not measured: %v\n", title, err)
		return fr, nil
	}
	rec.OK, rec.TimeMS = true, b.ms
	for _, c := range b.costs {
		if c.Server == b.server {
			rec.Requests += c.Count
		}
	}
	rec.Extra["rates_rps"] = b.rates
	rec.Extra["server_cpu_ms_per_request"] = b.cpuMS
	rec.Extra["bound_s"] = b.secs
	rec.Extra["bound_server"] = b.server
	e.sink.write(rec)
	tb := b.table(title, sofaMS, peak)
	bc := boundCase{nDBs: nDBs, docs: docs}
	for _, v := range []struct {
		props      bool
		tool, what string
	}{
		{false, "needed-requests bound", "source: 1 read per db; target: PUT /db + 1 _bulk_docs per 500 docs per db; same rates"},
		{true, "needed-requests bound, full fidelity", "also GET /db/_security and GET /db/_revs_limit per db on the source, which a server copy equal in conformance's sense needs; the target's properties are at their defaults"},
	} {
		nd, err := b.minimal(bc, v.props, runtime.NumCPU())
		if err != nil {
			tb.note("%s: not measured: %v", v.tool, err)
			continue
		}
		if !v.props {
			fr.tgtBound = nd.tgt
		}
		if sofaMS > 0 && nd.ms > 0 {
			r := float64(sofaMS) / float64(nd.ms)
			if v.props {
				fr.full = r
			} else {
				fr.bare = r
			}
		}
		mr := base
		mr.Tool, mr.OK, mr.TimeMS = v.tool, true, nd.ms
		mr.Extra = map[string]any{"source_s": nd.src, "target_s": nd.tgt, "servers_cpu_s": nd.cpu, "cores": nd.cores}
		e.sink.write(mr)
		cpu := "not measured"
		if nd.cpu > 0 {
			cpu = fmt.Sprintf("%.2f CPU-s, %.2f s of %d cores", nd.cpu, nd.cpu/float64(nd.cores), nd.cores)
		}
		tb.note("%s (%s) = %s s: the largest of the source alone %.2f s, the target alone %.2f s, and the two servers' CPU for those requests on the machine they share (%s)",
			v.tool, v.what, secs(nd.ms), nd.src, nd.tgt, cpu)
		tb.note("  sofa / %s = %s", v.tool, check(ratio(sofaMS, nd.ms), sofaMS, nd.ms, "<=", 1.3))
	}
	tb.print(os.Stdout)
	return fr, nil
}

// printFleetMedians prints, for a fleet case of several runs, each tool's
// median time and the median of each ratio taken within one run.
func printFleetMedians(caseName string, runs []fleetRun, couch bool, pool int, variants []string) {
	fmt.Fprintf(os.Stdout, "\n== fleet: %s, medians of %d runs (tools' order reversed every other run)\n", caseName, len(runs))
	med := func(f func(fleetRun) float64) (float64, string) { return fleetMedian(runs, f) }
	for _, tool := range append([]string{"sofa", "sofa-alt", "pool", "couch-pool"}, variants...) {
		if m, all := med(func(r fleetRun) float64 { return float64(r.times[tool]) / 1000 }); m > 0 {
			fmt.Fprintf(os.Stdout, "  %-10s median %.2f s (runs: %s)\n", tool, m, all)
		}
	}
	ratioOf := func(a, b string) func(fleetRun) float64 {
		return func(r fleetRun) float64 {
			if r.times[a] <= 0 || r.times[b] <= 0 {
				return 0
			}
			return float64(r.times[a]) / float64(r.times[b])
		}
	}
	// show prints one ratio's median; goal 0: a comparison, not a target.
	show := func(what string, f func(fleetRun) float64, op string, goal float64) {
		m, all := med(f)
		if m == 0 {
			return
		}
		verdict := ""
		if goal > 0 {
			met := m >= goal
			if op == "<=" {
				met = m <= goal
			}
			verdict = fmt.Sprintf(" (target %s %g: %s)", op, goal, map[bool]string{true: "met", false: "NOT met"}[met])
		}
		fmt.Fprintf(os.Stdout, "  %s: median %.2f%s (runs: %s)\n", what, m, verdict, all)
	}
	show(fmt.Sprintf("pool %d/sofa", pool), ratioOf("pool", "sofa"), ">=", 3)
	if couch {
		show(fmt.Sprintf("couch pool %d/sofa", pool), ratioOf("couch-pool", "sofa"), ">=", 3)
	}
	for _, v := range variants {
		show(v+" / sofa", ratioOf(v, "sofa"), "", 0)
	}
	show("sofa / needed-requests bound", func(r fleetRun) float64 { return r.bare }, "<=", 1.3)
	show("sofa / needed-requests bound, full fidelity", func(r fleetRun) float64 { return r.full }, "<=", 1.3)
}

// fleetMedian returns the median of f over the runs where it is positive
// (the upper one of an even count) and those values, comma-separated in
// run order; 0 and "n/a" when there is none.
func fleetMedian(runs []fleetRun, f func(fleetRun) float64) (float64, string) {
	var v []float64
	var all []string
	for _, r := range runs {
		if x := f(r); x > 0 {
			v = append(v, x)
			all = append(all, fmt.Sprintf("%.2f", x))
		}
	}
	if len(v) == 0 {
		return 0, "n/a"
	}
	slices.Sort(v)
	return v[len(v)/2], strings.Join(all, ", ")
}

// fleetVariants names the extra sofa runs of -sofa-variants ("sofa ARGS",
// one per ';'-separated argument set), in order.
func fleetVariants(spec string) []string {
	var names []string
	for _, v := range strings.Split(spec, ";") {
		if f := strings.Fields(v); len(f) > 0 {
			names = append(names, "sofa "+strings.Join(f, " "))
		}
	}
	return names
}
