package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lagFleet: -lag-dbs empty databases on the source, replicated by sofa's
// whole-server continuous mode (`sofa replicate --continuous SRC DST`);
// once every database exists on the target, a writer PUTs
// -lag-fleet-rate documents per second spread over the databases for
// -lag-phase. A document's lag is from its acknowledgement to the answer
// of a filtered longpoll of the target database (_changes?feed=longpoll
// &filter=_doc_ids) that holds it. sofa's open connections to the source
// are counted from /proc every 250 ms.
func (e *env) lagFleet(ctx context.Context, src, tgt *server) error {
	n := e.cfg.lagDBs
	if src.couch() {
		// CouchDB's _db_updates reads _global_changes, which a cluster
		// set up with _cluster_setup has and a bare single node lacks:
		// without it sofa lists the source every --poll-interval.
		if err := putDB(ctx, src.URL+"/_global_changes"); err != nil {
			return err
		}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%04d", i)
	}
	if err := forEach(ctx, 16, len(names), func(i int) error { return putDB(ctx, src.URL+"/"+names[i]) }); err != nil {
		return err
	}
	// The writer alone first (no replicator, the same spread): the
	// servers' CPU and the writer's latency without any replication.
	rate := e.cfg.lagFleetRate
	total := int(float64(rate) * e.cfg.lagPhase.Seconds())
	baseCPU := serversCPU([]*server{src, tgt})
	baseLat, baseSpan, err := spreadWrites(ctx, src.URL, names, "n", rate, total, e.cfg.lagWriters)
	if err != nil {
		return err
	}
	baseCPU = serversCPU([]*server{src, tgt}) - baseCPU
	t0 := time.Now()
	mport, err := freePort()
	if err != nil {
		return err
	}
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	rep, err := e.startProc(ctx, e.sofa, "replicate", "--continuous", "--include", "fleet-*",
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport), src.URL, tgt.URL)
	if err != nil {
		return err
	}
	defer rep.stop()
	pid, port := rep.cmd.Process.Pid, serverPort(src.URL)
	var maxConns atomic.Int64
	sampleCtx, stopSample := context.WithCancel(ctx)
	defer stopSample()
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if c := int64(sourceConns(pid, port)); c > maxConns.Load() {
					maxConns.Store(c)
				}
			case <-sampleCtx.Done():
				return
			}
		}
	}()
	// The initial copy: every database exists on the target, and a
	// document written to the last one arrives.
	for {
		have, err := userDBs(ctx, tgt.URL)
		if err != nil {
			return err
		}
		c := 0
		for _, h := range have {
			if strings.HasPrefix(h, "fleet-") {
				c++
			}
		}
		if c >= n {
			break
		}
		if time.Since(t0) > 15*time.Minute {
			return fmt.Errorf("fleet: %d of %d databases on the target after 15 min", c, n)
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if _, err := putDoc(ctx, src.URL+"/"+names[n-1], "warmup"); err != nil {
		return err
	}
	if _, err := waitDoc(ctx, tgt.URL+"/"+names[n-1], "warmup"); err != nil {
		return err
	}
	e.logf("lag: fleet: %d databases copied and followed after %s", n, time.Since(t0).Round(time.Millisecond))
	catchupConns := maxConns.Swap(0)
	c0, s0 := rep.cpuMS(), serversCPU([]*server{src, tgt})
	ws0 := time.Now()
	m0, err := scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	mode := sofaMode(ctx, metricsURL)
	var notice *noticeFeed
	if mode == "db_updates" {
		if notice, err = openNoticeFeed(ctx, src.URL); err != nil {
			return err
		}
		defer notice.close()
	}
	lags := make([]time.Duration, total)
	wlat := make([]time.Duration, total)
	wdb := make([]string, total)
	wsent, wack := make([]time.Time, total), make([]time.Time, total)
	var wg sync.WaitGroup
	werr := make(chan error, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	fail := func(err error) {
		select {
		case werr <- err:
		default:
		}
		wcancel()
	}
	next := make(chan int)
	var writers sync.WaitGroup
	for range e.cfg.lagWriters {
		writers.Go(func() {
			for i := range next {
				db := names[(i*7919)%n]
				id := fmt.Sprintf("f%06d", i)
				ts := time.Now()
				ack, err := putDoc(wctx, src.URL+"/"+db, id)
				if err != nil {
					fail(err)
					return
				}
				wlat[i] = ack.Sub(ts)
				wdb[i], wsent[i], wack[i] = db, ts, ack
				wg.Go(func() {
					seen, err := waitDoc(wctx, tgt.URL+"/"+db, id)
					if err != nil {
						fail(fmt.Errorf("%s/%s: %w", db, id, err))
						return
					}
					lags[i] = seen.Sub(ack)
				})
			}
		})
	}
	tw := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < total && wctx.Err() == nil; i++ {
		if d := time.Until(tw.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case next <- i:
		case <-wctx.Done():
		}
	}
	close(next)
	writers.Wait()
	span := time.Since(tw)
	wg.Wait()
	select {
	case err := <-werr:
		return fmt.Errorf("fleet: %w", err)
	default:
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	runConns := maxConns.Swap(0)
	cpu, scpu := rep.cpuMS()-c0, serversCPU([]*server{src, tgt})-s0
	m1, err := scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	d := func(k string) float64 { return m1[k] - m0[k] }
	wakes := d("sofa_catchups_total")
	srcReq, tgtReq := d(`sofa_host_requests_total{role="source"}`), d(`sofa_host_requests_total{role="target"}`)
	perWake := func(n float64) float64 {
		if wakes == 0 {
			return 0
		}
		return n / wakes
	}
	// Idle.
	c1 := rep.cpuMS()
	select {
	case <-time.After(e.cfg.lagIdle):
	case <-ctx.Done():
		return ctx.Err()
	}
	idle := rep.cpuMS() - c1
	idleConns := maxConns.Load()
	slices.Sort(lags)
	slices.Sort(wlat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	caseName := fmt.Sprintf("%d databases, %d writes/s spread", n, rate)
	fr := record{Bench: "lag", Case: caseName, Tool: "sofa-server", OK: true, Docs: int64(total), ServerCPUMS: scpu,
		Extra: map[string]any{"lag_p50_ms": ms(pct(lags, 0.5)), "lag_p99_ms": ms(pct(lags, 0.99)), "lag_max_ms": ms(pct(lags, 1)),
			"write_p50_ms": ms(pct(wlat, 0.5)), "write_p99_ms": ms(pct(wlat, 0.99)), "writes_per_s": float64(total) / span.Seconds(),
			"source_conns_catchup_max": catchupConns, "source_conns_max": runConns, "source_conns_idle_max": idleConns, "idle_cpu_ms": idle,
			"wakes": wakes, "source_requests": srcReq, "target_requests": tgtReq,
			"source_requests_per_wake": perWake(srcReq), "target_requests_per_wake": perWake(tgtReq)}}
	fr.CPUMS = cpu
	t := &table{title: "lag: " + caseName + " (sofa replicate --continuous SRC DST, whole server)",
		head: []string{"docs", "lag p50 ms", "lag p99 ms", "lag max ms", "write p99 ms", "writes/s", "sofa cpu s", "servers cpu s", "source conns max (catch-up/writes/idle)", "idle cpu ms"}}
	t.add(strconv.Itoa(total), msCell(pct(lags, 0.5)), msCell(pct(lags, 0.99)), msCell(pct(lags, 1)), msCell(pct(wlat, 0.99)),
		fmt.Sprintf("%.0f", float64(total)/span.Seconds()), secs(cpu), secs(scpu), fmt.Sprintf("%d/%d/%d", catchupConns, runConns, idleConns), strconv.FormatInt(idle, 10))
	p99 := pct(lags, 0.99).Milliseconds()
	t.note("lag p99 / 1 s = %s", check(ratio(p99, 1000), p99, 1000, "<=", 1))
	t.note("source connections of the sofa process (ESTABLISHED, /proc/PID/fd x /proc/net/tcp), sampled every 250 ms; %d databases", n)
	t.note("during the writes (sofa's --metrics-addr): %.0f wakes (catch-ups) for %d writes; requests per wake: source %.2f, target %.2f (checkpoints included)",
		wakes, total, perWake(srcReq), perWake(tgtReq))
	t.note("sofa watched the source by %s", mode)
	slices.Sort(baseLat)
	t.note("the writer alone before (no replicator, %d writes in %s): write p99 %s ms, servers cpu %s s = %.1f ms per write; with sofa (writes, then until the last arrived, %s): %s s = %.1f ms per write",
		total, baseSpan.Round(time.Millisecond), msCell(pct(baseLat, 0.99)), secs(baseCPU), float64(baseCPU)/float64(total),
		time.Since(ws0).Round(time.Millisecond), secs(scpu), float64(scpu)/float64(total))
	fr.Extra["none_servers_cpu_ms"], fr.Extra["none_write_p99_ms"] = baseCPU, ms(pct(baseLat, 0.99))
	if notice != nil {
		nd, missing := notice.notices(wdb, wsent, wack)
		t.note("the source's notice (the benchmark's own _db_updates feed: a write's acknowledgement to its database's row): p50 %s, p99 %s, max %s ms (%d writes without a row)",
			msCell(pct(nd, 0.5)), msCell(pct(nd, 0.99)), msCell(pct(nd, 1)), missing)
		fr.Extra["notice_p50_ms"], fr.Extra["notice_p99_ms"] = ms(pct(nd, 0.5)), ms(pct(nd, 0.99))
	}
	fr.Extra["mode"] = mode
	wp50, wp99 := histQuantile(m0, m1, "sofa_catchup_lag_seconds", 0.5), histQuantile(m0, m1, "sofa_catchup_lag_seconds", 0.99)
	rest := "the rest of the lag is the source's notice (CouchDB buffers _db_updates for up to [global_changes] max_write_delay, 500 ms by default)"
	if mode == "poll" {
		rest = "the rest of the lag is the wait for the next poll (--poll-interval)"
	}
	t.note("sofa's own account of a wake (sofa_catchup_lag_seconds: the _db_updates row or poll that noticed a change to the end of the catch-up that wrote it): p50 <= %s s, p99 <= %s s (bucket bounds); %s",
		strconv.FormatFloat(wp50, 'g', 3, 64), strconv.FormatFloat(wp99, 'g', 3, 64), rest)
	fr.Extra["wake_lag_p50_s_le"], fr.Extra["wake_lag_p99_s_le"] = wp50, wp99
	e.sink.write(fr)
	t.print(os.Stdout)
	return nil
}

// histQuantile is the upper bound of the bucket of a Prometheus histogram
// that holds quantile q of the observations made between two scrapes
// (+Inf: beyond the last bound; 0: no observation).
func histQuantile(m0, m1 map[string]float64, name string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	prefix := name + `_bucket{le="`
	for k, v := range m1 {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(k[len(prefix):], `"}`), 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v - m0[k]})
	}
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return 0
	}
	want := q * bs[len(bs)-1].n
	for _, b := range bs {
		if b.n >= want {
			return b.le
		}
	}
	return bs[len(bs)-1].le
}

// waitDoc returns when id is in the database's changes feed (a longpoll
// filtered on the id, answered at once when it is already there).
func waitDoc(ctx context.Context, dbURL, id string) (time.Time, error) {
	ids, _ := json.Marshal([]string{id})
	since := "0"
	for {
		u := dbURL + "/_changes?feed=longpoll&filter=_doc_ids&timeout=60000&since=" + url.QueryEscape(since) + "&doc_ids=" + url.QueryEscape(string(ids))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return time.Time{}, err
		}
		resp, err := feedClient.Do(req)
		if err != nil {
			return time.Time{}, err
		}
		var body struct {
			Results []struct {
				ID string `json:"id"`
			} `json:"results"`
			LastSeq json.RawMessage `json:"last_seq"`
		}
		derr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		now := time.Now()
		if resp.StatusCode == http.StatusNotFound {
			// The database is not yet on the target.
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return time.Time{}, ctx.Err()
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || derr != nil {
			return time.Time{}, fmt.Errorf("target _changes: HTTP %d %v", resp.StatusCode, derr)
		}
		for _, r := range body.Results {
			if r.ID == id {
				return now, nil
			}
		}
		if s := strings.Trim(string(body.LastSeq), `"`); s != "" {
			since = s
		}
	}
}

// forEach runs f(0..n-1) on par goroutines; the first error stops it.
func forEach(ctx context.Context, par, n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	for range par {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// scrape reads a Prometheus text page into name{labels} -> value (series
// without labels under their name).
func scrape(ctx context.Context, u string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// sofaMode is how sofa watches the source, from its /status page
// (db_updates or poll; "" if not said).
func sofaMode(ctx context.Context, metricsURL string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(metricsURL, "/metrics")+"/status", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var st struct {
		Mode string `json:"mode"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return st.Mode
}

// spreadWrites PUTs total documents (ids PREFIX000000..) at rate per
// second over dbs (write i into dbs[i*7919 % len]) with writers clients,
// and returns their latencies and the time they took.
func spreadWrites(ctx context.Context, serverURL string, dbs []string, prefix string, rate, total, writers int) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, total)
	next := make(chan int)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range next {
				ts := time.Now()
				ack, err := putDoc(ctx, serverURL+"/"+dbs[(i*7919)%len(dbs)], fmt.Sprintf("%s%06d", prefix, i))
				if err != nil {
					errs <- err
					for range next {
					}
					return
				}
				lat[i] = ack.Sub(ts)
			}
		})
	}
	t0 := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < total && ctx.Err() == nil; i++ {
		if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, 0, err
	default:
	}
	return lat, time.Since(t0), ctx.Err()
}
