package replicate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
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
	_ = fmt.Sprint
}
