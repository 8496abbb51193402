package main

import (
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
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("fleet-%04d", i)
	}
	if err := forEach(ctx, 16, len(names), func(i int) error { return putDB(ctx, src.URL+"/"+names[i]) }); err != nil {
		return err
	}
	t0 := time.Now()
	rep, err := e.startProc(ctx, e.sofa, "replicate", "--continuous", "--include", "fleet-*", src.URL, tgt.URL)
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
	rate := e.cfg.lagFleetRate
	total := int(float64(rate) * e.cfg.lagPhase.Seconds())
	lags := make([]time.Duration, total)
	wlat := make([]time.Duration, total)
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
			"source_conns_catchup_max": catchupConns, "source_conns_max": runConns, "source_conns_idle_max": idleConns, "idle_cpu_ms": idle}}
	fr.CPUMS = cpu
	e.sink.write(fr)
	t := &table{title: "lag: " + caseName + " (sofa replicate --continuous SRC DST, whole server)",
		head: []string{"docs", "lag p50 ms", "lag p99 ms", "lag max ms", "write p99 ms", "writes/s", "sofa cpu s", "servers cpu s", "source conns max (catch-up/writes/idle)", "idle cpu ms"}}
	t.add(strconv.Itoa(total), msCell(pct(lags, 0.5)), msCell(pct(lags, 0.99)), msCell(pct(lags, 1)), msCell(pct(wlat, 0.99)),
		fmt.Sprintf("%.0f", float64(total)/span.Seconds()), secs(cpu), secs(scpu), fmt.Sprintf("%d/%d/%d", catchupConns, runConns, idleConns), strconv.FormatInt(idle, 10))
	p99 := pct(lags, 0.99).Milliseconds()
	t.note("lag p99 / 1 s = %s", check(ratio(p99, 1000), p99, 1000, "<=", 1))
	t.note("source connections of the sofa process (ESTABLISHED, /proc/PID/fd x /proc/net/tcp), sampled every 250 ms; %d databases", n)
	t.print(os.Stdout)
	return nil
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
