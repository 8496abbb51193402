package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchSoak: memory of long continuous runs (issue 12: "memory stays
// flat over hours"). Two servers; -soak-dbs databases on the source;
// sofa's whole-server continuous mode (`sofa replicate --continuous
// SRC DST`) and, beside it, a one-database continuous run of one more
// database (`sofa replicate --continuous SRC/db DST/db`); a writer PUTs
// -soak-rate documents per second spread over every database for
// -soak-duration. Every -soak-sample each sofa process's resident set
// (/proc/PID/status VmRSS) and Go heap in use (go_memstats_heap_inuse_bytes
// from its --metrics-addr) are sampled; the slope of each (least squares
// over the samples after the first, per hour) is the result. At the end
// every database is checked equal on the target (the oracle).
func benchSoak(ctx context.Context, e *env) error {
	src, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	tgt, err := e.startServer(ctx)
	if err != nil {
		return err
	}
	if src.couch() {
		if err := putDB(ctx, src.URL+"/_global_changes"); err != nil {
			return err
		}
	}
	n := e.cfg.soakDBs
	names := make([]string, n+1)
	for i := range n {
		names[i] = fmt.Sprintf("soak-%03d", i)
	}
	one := "single-db"
	names[n] = one
	for _, db := range names {
		if err := putDB(ctx, src.URL+"/"+db); err != nil {
			return err
		}
	}
	if err := putDB(ctx, tgt.URL+"/"+one); err != nil {
		return err
	}
	type proc struct {
		name    string
		rep     *replicator
		metrics string
	}
	var procs []*proc
	start := func(name string, args ...string) error {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		rep, err := e.startProc(ctx, e.sofa, append([]string{"replicate", "--continuous", "--metrics-addr", addr}, args...)...)
		if err != nil {
			return err
		}
		procs = append(procs, &proc{name: name, rep: rep, metrics: "http://" + addr + "/metrics"})
		return nil
	}
	// With -soak-faults both runs reach the servers through fault proxies;
	// the writer and the oracle do not.
	srcURL, tgtURL, srcP, tgtP, err := soakProxies(e, src.URL, tgt.URL)
	if err != nil {
		return err
	}
	if srcP != nil {
		defer srcP.Stop()
		defer tgtP.Stop()
	}
	if err := start("sofa-server", "--include", "soak-*", srcURL, tgtURL); err != nil {
		return err
	}
	if err := start("sofa-one-db", srcURL+"/"+one, tgtURL+"/"+one); err != nil {
		return err
	}
	defer func() {
		for _, p := range procs {
			p.rep.stop()
		}
	}()
	// Both running: a first document reaches the target of each.
	for _, db := range []string{names[n-1], one} {
		if _, err := putDoc(ctx, src.URL+"/"+db, "warmup"); err != nil {
			return err
		}
		if _, err := waitDoc(ctx, tgt.URL+"/"+db, "warmup"); err != nil {
			return err
		}
	}
	e.logf("soak: %d databases followed; writing %d/s for %s", len(names), e.cfg.soakRate, e.cfg.soakDuration)

	type sample struct {
		at         time.Duration
		rss, heap  float64 // bytes
		goroutines float64
	}
	samples := make([][]sample, len(procs))
	t0 := time.Now()
	take := func() error {
		for i, p := range procs {
			m, err := scrape(ctx, p.metrics)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			samples[i] = append(samples[i], sample{at: time.Since(t0), rss: float64(procRSS(p.rep.cmd.Process.Pid)) * 1024,
				heap: m["go_memstats_heap_inuse_bytes"], goroutines: m["go_goroutines"]})
		}
		return nil
	}
	if err := take(); err != nil {
		return err
	}
	wctx, stopWrites := context.WithTimeout(ctx, e.cfg.soakDuration)
	defer stopWrites()
	var faultsDone sync.WaitGroup
	if srcP != nil {
		faultsDone.Go(func() { soakFaults(wctx, e, e.cfg.soakFaults, srcP, tgtP) })
	}
	var written, failed int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				db := names[i%len(names)]
				if _, err := putDoc(wctx, src.URL+"/"+db, fmt.Sprintf("s%08d", i)); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
					continue
				}
				mu.Lock()
				written++
				mu.Unlock()
			}
		})
	}
	tick := time.NewTicker(e.cfg.soakSample)
	defer tick.Stop()
	interval := time.Second / time.Duration(e.cfg.soakRate)
	tw := time.Now()
	var sampleErr error
writes:
	for i := 0; ; i++ {
		if d := time.Until(tw.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-time.After(d):
			case <-wctx.Done():
				break writes
			}
		}
		select {
		case <-tick.C:
			if err := take(); err != nil && sampleErr == nil {
				sampleErr = err
			}
		default:
		}
		select {
		case next <- i:
		case <-wctx.Done():
			break writes
		}
	}
	close(next)
	wg.Wait()
	faultsDone.Wait() // the faults are cleared: the runs catch up
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if sampleErr != nil {
		return sampleErr
	}
	if err := take(); err != nil {
		return err
	}
	// Every database equal on the target once the last writes arrived.
	verdict := "not checked"
	deadline := time.Now().Add(5 * time.Minute)
	for {
		verdict = e.oracle(ctx, src.URL, tgt.URL, true, tgt.Kind == kindPouchDB)
		if verdict == "equal" || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t := &table{title: fmt.Sprintf("soak: %d writes/s over %d databases for %s (%d written, %d failed), sampled every %s",
		e.cfg.soakRate, len(names), e.cfg.soakDuration, written, failed, e.cfg.soakSample),
		head: []string{"process", "samples", "rss first MiB", "rss last MiB", "rss max MiB", "rss slope MiB/h (2nd half)", "heap first MiB", "heap last MiB", "heap slope MiB/h (2nd half)", "goroutines first/last", "cpu s"}}
	mib := func(b float64) string { return strconv.FormatFloat(b/(1<<20), 'f', 1, 64) }
	for i, p := range procs {
		s := samples[i]
		// The slope leaves out the first sample (before any write).
		xs, rss, heap := make([]float64, 0, len(s)), make([]float64, 0, len(s)), make([]float64, 0, len(s))
		maxRSS := 0.0
		for _, v := range s[1:] {
			xs = append(xs, v.at.Hours())
			rss = append(rss, v.rss)
			heap = append(heap, v.heap)
			maxRSS = max(maxRSS, v.rss)
		}
		first, last := s[min(1, len(s)-1)], s[len(s)-1]
		// The second half: past the warm-up (caches, buffers, the
		// runtime's heap target reaching their size).
		h := len(xs) / 2
		both := func(ys []float64) string {
			return mib(slope(xs, ys)) + " (" + mib(slope(xs[h:], ys[h:])) + ")"
		}
		t.add(p.name, strconv.Itoa(len(s)), mib(first.rss), mib(last.rss), mib(maxRSS), both(rss),
			mib(first.heap), mib(last.heap), both(heap),
			fmt.Sprintf("%.0f/%.0f", first.goroutines, last.goroutines), secs(p.rep.cpuMS()))
		r := record{Bench: "soak", Case: fmt.Sprintf("%d/s over %d dbs for %s", e.cfg.soakRate, len(names), e.cfg.soakDuration), Tool: p.name, OK: verdict == "equal", Docs: written,
			Extra: map[string]any{"rss_slope_mib_per_h": slope(xs, rss) / (1 << 20), "heap_slope_mib_per_h": slope(xs, heap) / (1 << 20),
				"rss_slope_2nd_half_mib_per_h": slope(xs[h:], rss[h:]) / (1 << 20), "heap_slope_2nd_half_mib_per_h": slope(xs[h:], heap[h:]) / (1 << 20),
				"rss_first_mib": first.rss / (1 << 20), "rss_last_mib": last.rss / (1 << 20), "heap_first_mib": first.heap / (1 << 20), "heap_last_mib": last.heap / (1 << 20),
				"goroutines_first": first.goroutines, "goroutines_last": last.goroutines, "samples": len(s), "oracle": verdict,
				"sample_minutes":  minutes(s, func(v sample) float64 { return v.at.Minutes() }),
				"sample_rss_mib":  minutes(s, func(v sample) float64 { return v.rss / (1 << 20) }),
				"sample_heap_mib": minutes(s, func(v sample) float64 { return v.heap / (1 << 20) })}}
		r.CPUMS = p.rep.cpuMS()
		e.sink.write(r)
	}
	t.note("slope: least squares over the samples taken while writing (the first, before any write, left out), per hour; in parentheses over the second half of them; oracle: %s", verdict)
	if srcP != nil {
		t.note("faults every %s: %s", e.cfg.soakFaults, soakFaultCounts(srcP, tgtP))
	}
	for _, p := range procs {
		if st := p.rep.cmd.ProcessState; st != nil {
			t.note("%s ended during the soak: %s", p.name, st)
			verdict = p.name + " ended"
		}
	}
	t.print(os.Stdout)
	if verdict != "equal" {
		return fmt.Errorf("soak: the target differs: %s", verdict)
	}
	return nil
}

// minutes maps the samples through f, rounded to 0.01.
func minutes[S any](s []S, f func(S) float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(int64(f(v)*100+0.5)) / 100
	}
	return out
}

// slope is the least-squares slope of ys over xs (0 with fewer than two
// points).
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// procRSS is a process's resident set (KiB) from /proc, 0 if unknown.
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			if f := strings.Fields(line); len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb
			}
		}
	}
	return 0
}
