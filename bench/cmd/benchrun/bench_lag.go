package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
)

// benchLag: continuous replication lag (issue 12). Two servers (source and
// target). For each replicator (none: the writer alone; sofa with its
// default --flush-interval and with -lag-flush; CouchDB's own continuous
// replication, POST /_replicate on the target server; PouchDB's live
// replication from node) a fresh database pair, then phases: a writer PUTs
// single documents at -lag-rates writes/s for -lag-phase each (with
// -lag-writers concurrent clients, each document carrying its write time),
// then a burst of -lag-burst documents in one _bulk_docs, then
// -lag-idle with no writes. A document's lag is from the source's
// acknowledgement of its write to its row in the target's continuous
// _changes feed, read by the benchmark. CPU is read from /proc (the
// replicator process, each server). Then -lag-dbs databases replicated by
// sofa's whole-server continuous mode, with writes spread over them.
func benchLag(ctx context.Context, e *env) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	tgt, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	type tool struct {
		name  string
		start func(ctx context.Context, db string) (*replicator, error)
	}
	tools := []tool{{"none", nil},
		{"sofa", func(ctx context.Context, db string) (*replicator, error) {
			return e.startProc(ctx, e.sofa, "replicate", "--continuous", src.URL+"/"+db, tgt.URL+"/"+db)
		}},
		{"sofa-flush" + e.cfg.lagFlush.String(), func(ctx context.Context, db string) (*replicator, error) {
			return e.startProc(ctx, e.sofa, "replicate", "--continuous", "--flush-interval", e.cfg.lagFlush.String(), src.URL+"/"+db, tgt.URL+"/"+db)
		}},
	}
	if tgt.couch() {
		tools = append(tools, tool{"couchdb-replicator", func(ctx context.Context, db string) (*replicator, error) {
			return startCouchReplicator(ctx, tgt, src.URL+"/"+db, tgt.URL+"/"+db)
		}})
	}
	tools = append(tools, tool{"pouchdb-live", func(ctx context.Context, db string) (*replicator, error) {
		name, args := e.node("pouchdb-live.js", src.URL+"/"+db, tgt.URL+"/"+db)
		return e.startProc(ctx, name, args...)
	}})
	if !e.cfg.lagOne {
		return e.lagFleet(ctx, src, tgt)
	}
	servers := []*server{src, tgt}
	lt := &table{title: fmt.Sprintf("lag: one database, writes of ~100 B documents, %d writers (%s each steady phase)", e.cfg.lagWriters, e.cfg.lagPhase),
		head: []string{"replicator", "phase", "docs", "lag p50 ms", "lag p99 ms", "lag max ms", "write p50 ms", "write p99 ms", "writes/s", "repl cpu s", "servers cpu s"}}
	it := &table{title: fmt.Sprintf("lag: idle CPU over %s with no writes (after the phases)", e.cfg.lagIdle),
		head: []string{"replicator", "repl cpu ms", "servers cpu ms"}}
	res := map[string]map[string]lagResult{}
	for i, tl := range tools {
		db := fmt.Sprintf("lag-%d", i)
		for _, s := range servers {
			if err := putDB(ctx, s.URL+"/"+db); err != nil {
				return err
			}
		}
		res[tl.name] = map[string]lagResult{}
		var rep *replicator
		var feed *lagFeed
		if tl.start != nil {
			feed, err = openLagFeed(ctx, tgt.URL+"/"+db)
			if err != nil {
				return err
			}
			rep, err = tl.start(ctx, db)
			if err != nil {
				feed.close()
				return fmt.Errorf("%s: %w", tl.name, err)
			}
			// Warm-up: the replicator is running once a first document
			// arrives (CouchDB's scheduler takes seconds to start a job).
			t0 := time.Now()
			if _, err := putDoc(ctx, src.URL+"/"+db, "warmup"); err != nil {
				rep.stop()
				feed.close()
				return err
			}
			if err := feed.wait(ctx, []string{"warmup"}, 2*time.Minute); err != nil {
				rep.stop()
				feed.close()
				return fmt.Errorf("%s: warm-up: %w (its output: %s)", tl.name, err, rep.logTail())
			}
			e.logf("lag: %s: running (warm-up document copied after %s)", tl.name, time.Since(t0).Round(time.Millisecond))
		}
		phases := []string{}
		for _, r := range e.cfg.lagRates {
			phases = append(phases, fmt.Sprintf("%d/s", r))
		}
		if e.cfg.lagBurst > 0 {
			phases = append(phases, fmt.Sprintf("burst %d", e.cfg.lagBurst))
		}
		for pi, ph := range phases {
			c0, s0 := rep.cpuMS(), serversCPU(servers)
			var w writeRun
			prefix := fmt.Sprintf("p%d-", pi)
			if pi < len(e.cfg.lagRates) {
				w, err = steadyWrites(ctx, src.URL+"/"+db, prefix, e.cfg.lagRates[pi], e.cfg.lagPhase, e.cfg.lagWriters)
			} else {
				w, err = burstWrite(ctx, src.URL+"/"+db, prefix, e.cfg.lagBurst)
			}
			if err != nil {
				rep.stop()
				feed.close()
				return fmt.Errorf("%s %s: %w", tl.name, ph, err)
			}
			r := lagResult{writes: w}
			if feed != nil {
				if err := feed.wait(ctx, w.ids, 3*time.Minute); err != nil {
					rep.stop()
					feed.close()
					return fmt.Errorf("%s %s: %w", tl.name, ph, err)
				}
				r.lags = feed.lags(w)
			}
			r.replCPU, r.srvCPU = rep.cpuMS()-c0, serversCPU(servers)-s0
			res[tl.name][ph] = r
			lt.add(tl.name, ph, strconv.Itoa(len(w.ids)), msCell(r.lagPct(0.5)), msCell(r.lagPct(0.99)), msCell(r.lagPct(1)),
				msCell(w.pct(0.5)), msCell(w.pct(0.99)), fmt.Sprintf("%.0f", w.rate()), secs(r.replCPU), secs(r.srvCPU))
			e.sink.write(r.record(tl.name, ph))
			e.logf("lag: %s %s: lag p50 %s p99 %s max %s ms; write p50 %s p99 %s ms", tl.name, ph,
				msCell(r.lagPct(0.5)), msCell(r.lagPct(0.99)), msCell(r.lagPct(1)), msCell(w.pct(0.5)), msCell(w.pct(0.99)))
		}
		// Idle: no writes; a replicator that polls burns CPU here.
		c0, s0 := rep.cpuMS(), serversCPU(servers)
		select {
		case <-time.After(e.cfg.lagIdle):
		case <-ctx.Done():
		}
		ic, is := rep.cpuMS()-c0, serversCPU(servers)-s0
		it.add(tl.name, strconv.FormatInt(ic, 10), strconv.FormatInt(is, 10))
		ir := record{Bench: "lag", Case: "idle " + e.cfg.lagIdle.String(), Tool: tl.name, OK: true, ServerCPUMS: is}
		ir.CPUMS = ic
		e.sink.write(ir)
		rep.stop()
		feed.close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	hi := fmt.Sprintf("%d/s", slices.Max(e.cfg.lagRates))
	sofaFast := "sofa-flush" + e.cfg.lagFlush.String()
	p99 := func(tool string) int64 { return res[tool][hi].lagPct(0.99).Milliseconds() }
	for _, s := range []string{"sofa", sofaFast} {
		flush := 250 * time.Millisecond
		if s == sofaFast {
			flush = e.cfg.lagFlush
		}
		g := (flush + 50*time.Millisecond).Milliseconds()
		lt.note("%-22s p99 lag at %s / (flush %s + 50 ms) = %s", s, hi, flush, check(ratio(p99(s), g), p99(s), g, "<=", 1))
		for _, peer := range []string{"couchdb-replicator", "pouchdb-live"} {
			if _, ok := res[peer]; ok {
				lt.note("%-22s p99 lag at %s / %s's = %s", s, hi, peer, check(ratio(p99(s), p99(peer)), p99(s), p99(peer), "<=", 1))
			}
		}
		base := res["none"][hi].writes.pct(0.99).Microseconds()
		with := res[s][hi].writes.pct(0.99).Microseconds()
		lt.note("%-22s writer p99 at %s with / without a replicator = %s", s, hi, check(ratio(with, base), with, base, "<=", 1.10))
	}
	lt.note("lag: source PUT acknowledged -> row in the target's _changes (feed=continuous, read by the benchmark); burst: one _bulk_docs, lag from its answer")
	lt.print(os.Stdout)
	it.print(os.Stdout)
	if e.cfg.lagDBs > 0 {
		return e.lagFleet(ctx, src, tgt)
	}
	return nil
}

// lagResult is one replicator in one phase.
type lagResult struct {
	writes          writeRun
	lags            []time.Duration // sorted
	replCPU, srvCPU int64           // ms
}

func (r lagResult) lagPct(p float64) time.Duration { return pct(r.lags, p) }

func (r lagResult) record(tool, phase string) record {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rec := record{Bench: "lag", Case: phase, Tool: tool, OK: true, Docs: int64(len(r.writes.ids)), ServerCPUMS: r.srvCPU,
		Extra: map[string]any{
			"lag_p50_ms": ms(r.lagPct(0.5)), "lag_p99_ms": ms(r.lagPct(0.99)), "lag_max_ms": ms(r.lagPct(1)),
			"write_p50_ms": ms(r.writes.pct(0.5)), "write_p99_ms": ms(r.writes.pct(0.99)), "writes_per_s": r.writes.rate(),
		}}
	rec.CPUMS = r.replCPU
	return rec
}

// pct is the p-quantile of sorted d (0 when empty).
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

func msCell(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(d.Microseconds())/1000)
}
