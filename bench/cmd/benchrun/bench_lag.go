package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// writeRun is what a writer did: the ids written, when each write was
// acknowledged, the latency of each request (sorted) and the phase's span.
type writeRun struct {
	ids   []string
	acked map[string]time.Time
	lat   []time.Duration
	span  time.Duration
}

func (w writeRun) pct(p float64) time.Duration { return pct(w.lat, p) }
func (w writeRun) rate() float64 {
	if w.span <= 0 {
		return 0
	}
	return float64(len(w.ids)) / w.span.Seconds()
}

// steadyWrites PUTs rate documents per second for d into dbURL: a pacer
// releases write i at t0 + i/rate to the first free of writers clients.
func steadyWrites(ctx context.Context, dbURL, prefix string, rate int, d time.Duration, writers int) (writeRun, error) {
	n := int(float64(rate) * d.Seconds())
	w := writeRun{ids: make([]string, n), acked: make(map[string]time.Time, n), lat: make([]time.Duration, n)}
	acks := make([]time.Time, n)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := range next {
				id := fmt.Sprintf("%s%06d", prefix, i)
				t0 := time.Now()
				ack, err := putDoc(ctx, dbURL, id)
				if err != nil {
					cancel(err)
					return
				}
				w.ids[i], acks[i], w.lat[i] = id, ack, ack.Sub(t0)
			}
		})
	}
	t0 := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if wait := time.Until(t0.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return w, err
	}
	w.span = time.Since(t0)
	for i, id := range w.ids {
		w.acked[id] = acks[i]
	}
	slices.Sort(w.lat)
	return w, nil
}

// burstWrite writes n documents in one _bulk_docs; every document is
// acknowledged when the answer arrives.
func burstWrite(ctx context.Context, dbURL, prefix string, n int) (writeRun, error) {
	w := writeRun{ids: make([]string, n), acked: make(map[string]time.Time, n)}
	var buf bytes.Buffer
	buf.WriteString(`{"docs":[`)
	t0 := time.Now()
	for i := range n {
		if i > 0 {
			buf.WriteByte(',')
		}
		w.ids[i] = fmt.Sprintf("%s%06d", prefix, i)
		fmt.Fprintf(&buf, `{"_id":%q,"t":%d,"pad":"0123456789012345678901234567890123456789012345678901234567890123"}`, w.ids[i], t0.UnixMicro())
	}
	buf.WriteString(`]}`)
	req, err := newRequest(ctx, http.MethodPost, dbURL+"/_bulk_docs", buf.Bytes())
	if err != nil {
		return w, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return w, err
	}
	var rows []struct {
		Error string `json:"error"`
	}
	derr := json.NewDecoder(resp.Body).Decode(&rows)
	resp.Body.Close()
	ack := time.Now()
	if resp.StatusCode != http.StatusCreated || derr != nil {
		return w, fmt.Errorf("_bulk_docs: HTTP %d %v", resp.StatusCode, derr)
	}
	for _, r := range rows {
		if r.Error != "" {
			return w, fmt.Errorf("_bulk_docs: %s", r.Error)
		}
	}
	for _, id := range w.ids {
		w.acked[id] = ack
	}
	w.lat = []time.Duration{ack.Sub(t0)}
	w.span = ack.Sub(t0)
	return w, nil
}

// putDoc PUTs a ~100 B document carrying its write time and returns when
// the server acknowledged it.
func putDoc(ctx context.Context, dbURL, id string) (time.Time, error) {
	body := fmt.Appendf(nil, `{"t":%d,"pad":"0123456789012345678901234567890123456789012345678901234567890123"}`, time.Now().UnixMicro())
	req, err := newRequest(ctx, http.MethodPut, dbURL+"/"+id, body)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("PUT %s: %w", id, err)
	}
	resp.Body.Close()
	ack := time.Now()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
		return ack, fmt.Errorf("PUT %s: HTTP %d", id, resp.StatusCode)
	}
	return ack, nil
}

func putDB(ctx context.Context, dbURL string) error {
	req, err := newRequest(ctx, http.MethodPut, dbURL, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusPreconditionFailed {
		return fmt.Errorf("PUT %s: HTTP %d", redact(dbURL), resp.StatusCode)
	}
	return nil
}

// lagFeed reads a target database's continuous _changes feed and notes
// when each id first appears.
type lagFeed struct {
	cancel  context.CancelFunc
	mu      sync.Mutex
	seen    map[string]time.Time
	arrived chan struct{}
	done    chan struct{}
	err     error
}

var feedClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

func openLagFeed(ctx context.Context, dbURL string) (*lagFeed, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, dbURL+"/_changes?feed=continuous&since=now&heartbeat=1000", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	// Not gzip: PouchDB Server's compression would hold the rows back.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := feedClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("target _changes: HTTP %d", resp.StatusCode)
	}
	f := &lagFeed{cancel: cancel, seen: map[string]time.Time{}, arrived: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var row struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &row) != nil || row.ID == "" {
				continue
			}
			now := time.Now()
			f.mu.Lock()
			if _, ok := f.seen[row.ID]; !ok {
				f.seen[row.ID] = now
			}
			f.mu.Unlock()
			select {
			case f.arrived <- struct{}{}:
			default:
			}
		}
		f.mu.Lock()
		f.err = sc.Err()
		f.mu.Unlock()
	}()
	return f, nil
}

// wait returns once every id has appeared on the feed.
func (f *lagFeed) wait(ctx context.Context, ids []string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		got := 0
		for _, id := range ids {
			if _, ok := f.seen[id]; ok {
				got++
			}
		}
		f.mu.Unlock()
		if got == len(ids) {
			return nil
		}
		select {
		case <-f.arrived:
		case <-f.done:
			return fmt.Errorf("target feed ended (%v) with %d of %d documents", f.err, got, len(ids))
		case <-deadline.C:
			return fmt.Errorf("%d of %d documents reached the target within %s", got, len(ids), timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lags returns the sorted lags of w's documents.
func (f *lagFeed) lags(w writeRun) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Duration, 0, len(w.ids))
	for _, id := range w.ids {
		out = append(out, f.seen[id].Sub(w.acked[id]))
	}
	slices.Sort(out)
	return out
}

func (f *lagFeed) close() {
	if f == nil {
		return
	}
	f.cancel()
	<-f.done
}

// replicator is a running continuous replication: a child process (sofa,
// node) or a CouchDB replication job (cancelled through the server).
type replicator struct {
	cmd    *exec.Cmd
	log    *os.File
	cancel func()
}

// startProc starts name args as a child process (own process group, output
// into a log file of the scratch directory).
func (e *env) startProc(ctx context.Context, name string, args ...string) (*replicator, error) {
	log, err := os.CreateTemp(e.tmp, filepath.Base(name)+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = e.root
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	if e.verbose {
		e.logf("$ %s %s", name, strings.Join(args, " "))
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	return &replicator{cmd: cmd, log: log}, nil
}

// startCouchReplicator starts a continuous replication on the target
// server (POST /_replicate, continuous: true).
func startCouchReplicator(ctx context.Context, tgt *server, from, to string) (*replicator, error) {
	body := map[string]any{"source": from, "target": to, "continuous": true}
	b, _ := json.Marshal(body)
	req, err := newRequest(ctx, http.MethodPost, tgt.URL+"/_replicate", b)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("POST /_replicate: HTTP %d", resp.StatusCode)
	}
	return &replicator{cancel: func() {
		body["cancel"] = true
		b, _ := json.Marshal(body)
		if req, err := newRequest(context.Background(), http.MethodPost, tgt.URL+"/_replicate", b); err == nil {
			if resp, err := httpClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}}, nil
}

// cpuMS is the replicator process's CPU time so far (0: none, or a job
// inside a server, counted in the servers' CPU).
func (r *replicator) cpuMS() int64 {
	if r == nil || r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return procCPU(r.cmd.Process.Pid)
}

// stop ends the replication: SIGTERM to the process (SIGKILL after 15 s).
func (r *replicator) stop() {
	if r == nil {
		return
	}
	if r.cancel != nil {
		r.cancel()
	}
	if r.cmd == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	r.log.Close()
}

// logTail is the end of the replicator process's output.
func (r *replicator) logTail() string {
	if r == nil || r.log == nil {
		return "-"
	}
	b, _ := os.ReadFile(r.log.Name())
	if len(b) > 1000 {
		b = b[len(b)-1000:]
	}
	return strings.TrimSpace(string(b))
}

// procCPU is a process's user + system CPU time (ms) from /proc.
func procCPU(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return (u + s) * 10
}

func serversCPU(s []*server) int64 {
	var n int64
	for _, v := range s {
		c, _ := v.usage()
		n += c
	}
	return n
}

// sourceConns counts the TCP connections of process pid to 127.0.0.1:port
// (its socket inodes in /proc/PID/fd matched against /proc/net/tcp).
func sourceConns(pid, port int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return 0
	}
	want := fmt.Sprintf(":%04X", port)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// sl local rem st ... inode (field 9)
		if len(f) > 9 && strings.HasSuffix(f[2], want) && f[3] == "01" && inodes[f[9]] {
			n++
		}
	}
	return n
}

// serverPort is the TCP port of a server URL.
func serverPort(u string) int {
	p, err := url.Parse(u)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p.Port())
	return n
}
