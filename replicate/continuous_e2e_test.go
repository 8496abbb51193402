package replicate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/replicate"
)

// recObserver records what the engine tells its Observer.
type recObserver struct {
	mu          sync.Mutex
	seen        int
	written     int
	failures    int
	batches     int
	lags        []time.Duration
	checkpoints []string
	reconnects  []error
	edges       []bool
	edge        chan bool // every CaughtUp edge, as it happens
}

func newRecObserver() *recObserver { return &recObserver{edge: make(chan bool, 1000)} }

func (o *recObserver) ChangesSeen(n int, pending int64) {
	o.mu.Lock()
	o.seen += n
	o.mu.Unlock()
}
func (o *recObserver) BatchWritten(docs, failures int, lag time.Duration) {
	o.mu.Lock()
	o.written += docs
	o.failures += failures
	o.batches++
	o.lags = append(o.lags, lag)
	o.mu.Unlock()
}
func (o *recObserver) Checkpointed(seq string) {
	o.mu.Lock()
	o.checkpoints = append(o.checkpoints, seq)
	o.mu.Unlock()
}
func (o *recObserver) Reconnected(err error) {
	o.mu.Lock()
	o.reconnects = append(o.reconnects, err)
	o.mu.Unlock()
}
func (o *recObserver) CaughtUp(c bool) {
	o.mu.Lock()
	o.edges = append(o.edges, c)
	o.mu.Unlock()
	o.edge <- c
}

func (o *recObserver) snapshot() recObserver {
	o.mu.Lock()
	defer o.mu.Unlock()
	return recObserver{seen: o.seen, written: o.written, failures: o.failures, batches: o.batches,
		lags: append([]time.Duration(nil), o.lags...), checkpoints: append([]string(nil), o.checkpoints...),
		reconnects: append([]error(nil), o.reconnects...), edges: append([]bool(nil), o.edges...)}
}

// waitCaughtUp waits for the next CaughtUp(true) edge.
func (o *recObserver) waitCaughtUp(t *testing.T) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case c := <-o.edge:
			if c {
				return
			}
		case <-deadline:
			t.Fatal("no caught-up edge within 2 minutes")
		}
	}
}

// follower is a continuous run in the background.
type follower struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    *replicate.Result
	err    error
}

func follow(t *testing.T, sdb replicate.Source, tdb replicate.Target, opts replicate.Options) *follower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &follower{cancel: cancel, done: make(chan struct{})}
	opts.Continuous = true
	if opts.Log == nil {
		opts.Log = func(s string) { t.Log("sofa: " + s) }
	}
	go func() {
		defer close(f.done)
		f.res, f.err = replicate.Run(ctx, sdb, tdb, opts)
	}()
	t.Cleanup(func() { cancel(); <-f.done })
	return f
}

// stop cancels the run, waits for its end and checks it ended as
// interrupted, with its final checkpoint.
func (f *follower) stop(t *testing.T) *replicate.Result {
	t.Helper()
	f.cancel()
	select {
	case <-f.done:
	case <-time.After(time.Minute):
		t.Fatal("the run did not end within a minute of its cancellation")
	}
	if !errors.Is(f.err, context.Canceled) {
		t.Fatalf("run ended with %v, want context.Canceled (interrupted)", f.err)
	}
	return f.res
}

// alive fails the test when the run has ended on its own.
func (f *follower) alive(t *testing.T) {
	t.Helper()
	select {
	case <-f.done:
		t.Fatalf("the continuous run ended: %v", f.err)
	default:
	}
}

// waitEqual polls the oracle until the target equals the source.
func waitEqual(t *testing.T, srv *couchtest.Server, src, tgt string, f *follower) {
	t.Helper()
	opts := couchtest.CompareOptions{}
	if srv.Kind == couchtest.PouchDB {
		opts = pouch
	}
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		f.alive(t)
		d, err := couchtest.CompareDBs(t.Context(), srv.DBURL(src), srv.DBURL(tgt), opts)
		if err == nil && d.Equal() {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = d.String()
		}
		select {
		case <-f.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("the target did not become equal to the source: %s", last)
}

func localLoad(t *testing.T, srv *couchtest.Server, db string, from, n int) {
	t.Helper()
	for start := from; start < from+n; start += 500 {
		var docs []json.RawMessage
		for i := start; i < min(from+n, start+500); i++ {
			docs = append(docs, raw(`{"_id":"c%05d","i":%d}`, i, i))
		}
		mustBulk(t, srv, db, true, docs...)
	}
}

// Writes made while the run follows appear on the target: new documents,
// updates, deletions and conflicting leaves; the Observer hears of the
// rows, the batches with their lag, the caught-up edges and the final
// checkpoint.
func TestContinuous_WritesConflictsDeletions(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	loadDocs(t, srv, src, 50, 50)
	obs := newRecObserver()
	f := follow(t, sdb, tdb, replicate.Options{Observer: obs, FlushInterval: 100 * time.Millisecond})
	obs.waitCaughtUp(t)
	waitEqual(t, srv, src, tgt, f)

	c := srv.Client()
	ctx := t.Context()
	rev, err := c.PutDoc(ctx, src, "live1", map[string]any{"v": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, src, "live1", map[string]any{"_rev": rev, "v": 2}); err != nil {
		t.Fatal(err)
	}
	del, err := c.PutDoc(ctx, src, "gone", map[string]any{"v": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, src, "gone", map[string]any{"_rev": del, "_deleted": true}); err != nil {
		t.Fatal(err)
	}
	// A conflict: two branches of one document, written as a replicator would.
	mustBulk(t, srv, src, false,
		raw(`{"_id":"conf","_rev":"2-aaa","v":"a","_revisions":{"start":2,"ids":["aaa","root"]}}`),
		raw(`{"_id":"conf","_rev":"2-bbb","v":"b","_revisions":{"start":2,"ids":["bbb","root"]}}`),
		raw(`{"_id":"conf","_rev":"3-ccc","_deleted":true,"_revisions":{"start":3,"ids":["ccc","ddd","root"]}}`))
	localLoad(t, srv, src, 0, 120)
	waitEqual(t, srv, src, tgt, f)
	assertNoExtraLeaves(t, srv, src, tgt)

	res := f.stop(t)
	s := obs.snapshot()
	t.Logf("stats %+v; observer: seen %d, written %d in %d batches, checkpoints %v, edges %v", res.Stats, s.seen, s.written, s.batches, s.checkpoints, s.edges)
	if s.written != int(res.Stats.DocsWritten) || s.failures != 0 {
		t.Errorf("observer: %d written, %d failures; stats say %d written", s.written, s.failures, res.Stats.DocsWritten)
	}
	if int64(s.seen) != res.Stats.ChangesRead {
		t.Errorf("observer saw %d rows, stats %d", s.seen, res.Stats.ChangesRead)
	}
	for _, l := range s.lags {
		if l <= 0 || l > time.Minute {
			t.Errorf("batch lag %v", l)
		}
	}
	if len(s.checkpoints) == 0 || s.checkpoints[len(s.checkpoints)-1] != res.EndSeq.String() {
		t.Errorf("checkpoints %v, want the last at the result's seq %s", s.checkpoints, res.EndSeq.String())
	}
	if len(s.edges) == 0 || !s.edges[0] {
		t.Errorf("caught-up edges %v, want a first caught-up edge", s.edges)
	}
	for i := 1; i < len(s.edges); i++ {
		if s.edges[i] == s.edges[i-1] {
			t.Errorf("edges %v: not edges", s.edges)
		}
	}
	// The final checkpoint is on the target: a one-shot rerun copies nothing.
	again := runOK(t, sdb, tdb, replicate.Options{})
	if again.Stats.DocsWritten != 0 || again.StartSeq.String() != res.EndSeq.String() {
		t.Errorf("rerun: start %s (want %s), %d written", again.StartSeq.String(), res.EndSeq.String(), again.Stats.DocsWritten)
	}
}

// A continuous run stopped by its context writes a final checkpoint (here
// the only one: the timer is an hour) covering every acknowledged write;
// a restart resumes from it and writes only the changes made since.
func TestContinuous_KilledRunResumes(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	localLoad(t, srv, src, 0, 100)
	f := follow(t, sdb, tdb, replicate.Options{CheckpointInterval: time.Hour})
	waitEqual(t, srv, src, tgt, f)
	localLoad(t, srv, src, 100, 40) // while following
	waitEqual(t, srv, src, tgt, f)
	res1 := f.stop(t)
	if res1.Stats.DocsWritten != 140 || res1.Stats.Checkpoints != 1 {
		t.Fatalf("first run: %+v, want 140 written and one (final) checkpoint", res1.Stats)
	}
	var cp struct {
		SourceLastSeq any `json:"source_last_seq"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(tgt)+"/_local/"+res1.ReplicationID, &cp); err != nil {
		t.Fatalf("the final checkpoint is not on the target: %v", err)
	}
	if got := fmt.Sprint(cp.SourceLastSeq); got != res1.EndSeq.String() {
		t.Errorf("target checkpoint at %s, want the run's end seq %s", got, res1.EndSeq.String())
	}

	localLoad(t, srv, src, 140, 30) // while stopped
	obs := newRecObserver()
	f2 := follow(t, openDB(t, srv, src), openDB(t, srv, tgt), replicate.Options{Observer: obs})
	obs.waitCaughtUp(t)
	localLoad(t, srv, src, 170, 5) // and while following again
	waitEqual(t, srv, src, tgt, f2)
	res2 := f2.stop(t)
	t.Logf("second run: start %s, stats %+v", res2.StartSeq.String(), res2.Stats)
	if res2.StartSeq.String() != res1.EndSeq.String() {
		t.Errorf("restart started at %s, want the checkpoint %s", res2.StartSeq.String(), res1.EndSeq.String())
	}
	if res2.Stats.DocsWritten != 35 || res2.Stats.ChangesRead != 35 {
		t.Errorf("restart read %d changes and wrote %d revisions, want 35 and 35 (nothing copied twice)", res2.Stats.ChangesRead, res2.Stats.DocsWritten)
	}
}

// Fast writes while following cost a request per batch, not per change:
// 2,000 documents written in four _bulk_docs requests arrive with a few
// _revs_diff and no _bulk_get (generation-1 documents come with the
// feed), through one long-lived feed request.
func TestContinuous_FastWritesAreBatched(t *testing.T) {
	srv, src, tgt, _, _ := pair(t)
	localLoad(t, srv, src, 0, 10)
	runOK(t, openDB(t, srv, src), openDB(t, srv, tgt), replicate.Options{}) // not an initial copy: _revs_diff is asked
	rec := recproxy.Start(t, srv.AdminURL())
	u, _ := url.Parse(rec.URL)
	u.User = url.UserPassword(srv.AdminUser, srv.AdminPassword)
	obs := newRecObserver()
	f := follow(t, openAt(t, u.String(), src), openAt(t, u.String(), tgt), replicate.Options{Observer: obs})
	obs.waitCaughtUp(t)
	before := len(rec.Recorded()) // the feed stays open: do not wait for it
	localLoad(t, srv, src, 10, 2000)
	waitEqual(t, srv, src, tgt, f)
	res := f.stop(t)
	count := map[string]int{}
	total := 0
	for _, e := range rec.Exchanges()[before:] {
		total++
		switch {
		case strings.HasSuffix(e.Path, "/_revs_diff"):
			count["_revs_diff"]++
		case strings.HasSuffix(e.Path, "/_bulk_get"):
			count["_bulk_get"]++
		case strings.HasSuffix(e.Path, "/_bulk_docs"):
			count["_bulk_docs"]++
		case strings.HasSuffix(e.Path, "/_changes"):
			count["_changes"]++
		default:
			count[e.Method+" other"]++
		}
	}
	t.Logf("%s: %d requests for 2000 changes: %v; stats %+v", srv.Kind, total, count, res.Stats)
	if count["_revs_diff"] > 2000/50 || count["_bulk_docs"] > 2000/50 || count["_bulk_get"] > 2000/50 {
		t.Errorf("%v: more than one request per 50 changes", count)
	}
	if total > 2000/20 {
		t.Errorf("%d requests for 2000 changes, want at most 100", total)
	}
}

// A source that cannot follow its feed (here one that hides Follow, as an
// archive does) is refused at once.
func TestContinuous_SourceMustFollow(t *testing.T) {
	_, _, _, sdb, tdb := pair(t)
	_, err := replicate.Run(t.Context(), struct{ replicate.Source }{sdb}, tdb, replicate.Options{Continuous: true})
	if !errors.Is(err, replicate.ErrNotFollowable) {
		t.Fatalf("err = %v, want ErrNotFollowable", err)
	}
}

// Faults while following, through the fault proxy: the feed cut mid-stream
// three times and answered 503 twice when reopened, target requests reset
// and answered 503, then the target unreachable (every request reset)
// for longer than the client's retry budget. The run reconnects, retries
// its batches, says so in its log, and the target ends equal to the
// source, with no extra leaf.
func TestContinuous_Faults(t *testing.T) {
	copts := faultOpts
	copts.RetryTime = 2 * time.Second // the target's outage outlasts it
	e := newFaultEnv(t, copts)
	loadDocs(t, e.srv, e.src, 100, 50)
	runOK(t, e.sdb, e.tdb, replicate.Options{}) // not an initial copy: _revs_diff is asked
	// The first feed request (the catch-up's) passes; the continuous
	// feed is then cut three times and refused twice.
	e.rules(t,
		faultproxy.Rule{Name: "cut", Method: "GET", Path: path(e.src, "/_changes$"), Fault: faultproxy.CutChanges, CutRows: 30, After: 1, Times: 3},
		faultproxy.Rule{Name: "503-feed", Method: "GET", Path: path(e.src, "/_changes$"), Fault: faultproxy.Status, Status: 503, After: 1, Times: 2},
		faultproxy.Rule{Name: "reset-docs", Method: "POST", Path: path(e.tgt, "/_bulk_docs$"), Fault: faultproxy.Reset, Times: 3},
		faultproxy.Rule{Name: "503-diff", Method: "POST", Path: path(e.tgt, "/_revs_diff$"), Fault: faultproxy.Status, Status: 503, Times: 3},
	)
	obs := newRecObserver()
	logs := make(chan string, 1000)
	var feedMu sync.Mutex
	var feedLines []string // "feed lost" and "feed back" lines, in order
	f := follow(t, e.sdb, e.tdb, replicate.Options{Observer: obs, BatchSize: 50, CheckpointInterval: 300 * time.Millisecond,
		Log: func(s string) {
			t.Log("sofa: " + s)
			if strings.HasPrefix(s, "feed ") {
				feedMu.Lock()
				feedLines = append(feedLines, s)
				feedMu.Unlock()
			}
			select {
			case logs <- s:
			default:
			}
		}})
	c := e.srv.Client()
	for i := 0; i < 10; i++ {
		localLoad(t, e.srv, e.src, i*40, 40)
		rev, err := c.PutDoc(t.Context(), e.src, fmt.Sprintf("u%d", i), map[string]any{"v": i})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := c.PutDoc(t.Context(), e.src, fmt.Sprintf("u%d", i), map[string]any{"_rev": rev, "_deleted": true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitEqual(t, e.srv, e.src, e.tgt, f)
	st := e.px.Stats().Rules
	t.Logf("rules %+v", st)
	for _, name := range []string{"cut", "503-feed", "reset-docs", "503-diff"} {
		if st[name].Fired == 0 {
			t.Errorf("rule %s did not fire", name)
		}
	}
	if st["cut"].Fired != 3 || st["503-feed"].Fired != 2 {
		t.Errorf("feed faults fired %d and %d times, want 3 and 2", st["cut"].Fired, st["503-feed"].Fired)
	}
	if n := len(obs.snapshot().reconnects); n != 5 {
		t.Errorf("%d reconnects reported, want 5 (3 cuts of the feed, 2 answers 503)", n)
	}
	// Each outage ends with a line saying the feed is back: 3 outages
	// (the last one's first 2 reconnects answered 503).
	feedMu.Lock()
	var lost, back int
	for _, l := range feedLines {
		switch {
		case strings.HasPrefix(l, "feed lost"):
			lost++
		case strings.HasPrefix(l, "feed back"):
			back++
		}
	}
	if lost != 5 || back != 3 || !strings.HasPrefix(feedLines[len(feedLines)-1], "feed back after") || !strings.Contains(feedLines[len(feedLines)-1], "(3 reconnect attempts)") {
		t.Errorf("feed lines %q: want 5 lost, 3 back, the last back after 3 reconnect attempts", feedLines)
	}
	feedMu.Unlock()

	// The target goes away: every request to it is reset.
	e.rules(t, faultproxy.Rule{Name: "down", Path: path(e.tgt, ""), Fault: faultproxy.Reset})
	localLoad(t, e.srv, e.src, 1000, 60)
	for retried := false; !retried; {
		select {
		case s := <-logs:
			retried = strings.Contains(s, "failed") && strings.Contains(s, "retrying in")
		case <-f.done:
			t.Fatalf("the run ended while the target was down: %v", f.err)
		case <-time.After(2 * time.Minute):
			t.Fatal("no batch retry logged while the target was down")
		}
	}
	e.rules(t) // back
	localLoad(t, e.srv, e.src, 1060, 20)
	waitEqual(t, e.srv, e.src, e.tgt, f)
	assertNoExtraLeaves(t, e.srv, e.src, e.tgt)
	res := f.stop(t)
	t.Logf("stats %+v; down fired %d", res.Stats, e.px.Rule("down").Fired)
	if res.Stats.DocWriteFailures != 0 {
		t.Errorf("%d write failures: %v", res.Stats.DocWriteFailures, res.Failures)
	}
	// The final checkpoint covers the whole feed: a one-shot rerun reads
	// no change.
	again := runOK(t, e.sdb, e.tdb, replicate.Options{})
	if again.Stats.ChangesRead != 0 {
		t.Errorf("rerun read %d changes, want 0", again.Stats.ChangesRead)
	}
}

// goroutinesButConns counts the goroutines but those of HTTP connections
// (a client's keep-alive connection has two, a server's one), whose
// number follows the requests in flight, not what a run accumulates.
func goroutinesButConns() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "net/http.(*persistConn)") || strings.Contains(g, "net/http.(*conn).serve") {
			continue
		}
		count++
	}
	return count
}

// Following a steady trickle of single-document writes keeps the heap and
// the goroutines flat: nothing accumulates per change or per batch (the
// tracker, the liveness map, failures, timers).
func TestContinuous_MemoryFlat(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	f := follow(t, sdb, tdb, replicate.Options{FlushInterval: 20 * time.Millisecond, CheckpointInterval: 200 * time.Millisecond})
	c := srv.Client()
	trickle := func(from, n int) {
		for i := from; i < from+n; i++ {
			if _, err := c.PutDoc(t.Context(), src, fmt.Sprintf("m%05d", i), map[string]any{"i": i, "pad": strings.Repeat("x", 500)}); err != nil {
				t.Fatal(err)
			}
		}
		waitEqual(t, srv, src, tgt, f)
	}
	measure := func() (uint64, int) {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapInuse, goroutinesButConns()
	}
	trickle(0, 200)
	h0, g0 := measure()
	trickle(200, 1000)
	h1, g1 := measure()
	res := f.stop(t)
	t.Logf("heap in use %d KiB -> %d KiB, goroutines %d -> %d after 1000 more changes in %d batches", h0>>10, h1>>10, g0, g1, res.Stats.Batches)
	if h1 > h0+8<<20 {
		t.Errorf("heap grew from %d KiB to %d KiB over 1000 changes", h0>>10, h1>>10)
	}
	if g1 > g0+5 {
		t.Errorf("goroutines grew from %d to %d", g0, g1)
	}
	if res.Stats.Batches < 20 {
		t.Errorf("%d batches: the trickle was not followed batch by batch", res.Stats.Batches)
	}
}

// A one-shot run tells its Observer too: the rows, each batch with its
// revisions and lag, the final checkpoint, and one caught-up edge at the
// end of the feed; never a reconnect.
func TestObserver_OneShot(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	loadDocs2(t, srv, src, 230, 20) // generation 2: read with _bulk_get
	obs := newRecObserver()
	res := runOK(t, sdb, tdb, replicate.Options{BatchSize: 50, Observer: obs})
	s := obs.snapshot()
	t.Logf("observer: seen %d, written %d in %d batches, checkpoints %v, edges %v", s.seen, s.written, s.batches, s.checkpoints, s.edges)
	if s.seen != 230 || s.written != 230 || s.batches != 5 || s.failures != 0 {
		t.Errorf("observer: %d rows, %d written in %d batches, %d failures; want 230, 230 in 5, 0", s.seen, s.written, s.batches, s.failures)
	}
	if len(s.checkpoints) != 1 || s.checkpoints[0] != res.EndSeq.String() {
		t.Errorf("checkpoints %v, want one at %s", s.checkpoints, res.EndSeq.String())
	}
	if len(s.edges) != 1 || !s.edges[0] || len(s.reconnects) != 0 {
		t.Errorf("edges %v, reconnects %v; want one caught-up edge and no reconnect", s.edges, s.reconnects)
	}
	for _, l := range s.lags {
		if l <= 0 || l > time.Minute {
			t.Errorf("batch lag %v", l)
		}
	}
	_ = tgt
}

// An idle source costs nothing: while nothing is written, the run sends
// no request (the feed stays open, kept alive by heartbeats; checkpoints
// are written only when the seq moved) and never reconnects, on either
// server (both send the heartbeats asked for).
func TestContinuous_IdleIsQuiet(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	localLoad(t, srv, src, 0, 20)
	obs := newRecObserver()
	f := follow(t, sdb, tdb, replicate.Options{Observer: obs, Heartbeat: 200 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond})
	obs.waitCaughtUp(t)
	waitEqual(t, srv, src, tgt, f)
	for len(obs.snapshot().checkpoints) == 0 { // the checkpoint of the catch-up
		select {
		case <-f.done:
			t.Fatalf("run ended: %v", f.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	before := sdb.Server().Stats.Requests.Load() + tdb.Server().Stats.Requests.Load()
	// A window of ten heartbeat watchdog periods (3 heartbeats each)
	// without a write: what is asserted is that nothing happens in it.
	select {
	case <-f.done:
		t.Fatalf("the run ended while idle: %v", f.err)
	case <-time.After(10 * 3 * 200 * time.Millisecond):
	}
	after := sdb.Server().Stats.Requests.Load() + tdb.Server().Stats.Requests.Load()
	f.alive(t)
	if s := obs.snapshot(); len(s.reconnects) != 0 || after != before {
		t.Errorf("idle for 6 s: %d requests, reconnects %v; want none", after-before, s.reconnects)
	}
	localLoad(t, srv, src, 20, 5)
	waitEqual(t, srv, src, tgt, f)
	f.stop(t)
}

// A continuous run that copies metadata follows it: a `_security` (and,
// on CouchDB, a `_revs_limit`) changed at the source after the catch-up
// reaches the target within MetadataInterval, said in the run's log.
func TestContinuous_FollowsSecurity(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	loadDocs(t, srv, src, 5, 50)
	obs := newRecObserver()
	logged := make(chan string, 100)
	f := follow(t, sdb, tdb, replicate.Options{Observer: obs, CopyMetadata: true, MetadataInterval: 100 * time.Millisecond,
		Log: func(s string) {
			t.Log("sofa: " + s)
			select {
			case logged <- s:
			default: // never block the run: lines past 100 unread are dropped
			}
		}})
	obs.waitCaughtUp(t)
	c := srv.Client()
	ctx := t.Context()
	sec := `{"admins":{"names":[],"roles":[]},"members":{"names":["alice"],"roles":["staff"]}}`
	if _, err := c.Do(ctx, "PUT", "/"+src+"/_security", []byte(sec), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"_security changed at the source"}
	if srv.Kind == couchtest.CouchDB {
		if _, err := c.Do(ctx, "PUT", "/"+src+"/_revs_limit", []byte("77"), nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, "_revs_limit changed at the source")
	}
	deadline := time.After(2 * time.Minute)
	for len(want) > 0 {
		select {
		case s := <-logged:
			for i, w := range want {
				if strings.HasPrefix(s, w) {
					want = append(want[:i], want[i+1:]...)
					break
				}
			}
		case <-deadline:
			t.Fatalf("not logged within 2 minutes: %q", want)
		}
		f.alive(t)
	}
	var got struct {
		Members struct {
			Names []string `json:"names"`
		} `json:"members"`
	}
	if err := c.GetJSON(ctx, "/"+tgt+"/_security", &got); err != nil || len(got.Members.Names) != 1 || got.Members.Names[0] != "alice" {
		t.Fatalf("target _security %+v (%v), want the source's members", got, err)
	}
	if srv.Kind == couchtest.CouchDB {
		var n int
		if err := c.GetJSON(ctx, "/"+tgt+"/_revs_limit", &n); err != nil || n != 77 {
			t.Fatalf("target _revs_limit %d (%v), want 77", n, err)
		}
	}
	f.stop(t)
}
