package sofa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/metrics"
)

// syncRun is a sofa.Sync running in the background, with what its events
// said so far.
type syncRun struct {
	t       *testing.T
	cancel  context.CancelFunc
	done    chan struct{}
	sum     *sofa.SyncSummary
	err     error
	metrics string // base URL of the metrics server

	mu       sync.Mutex
	changed  *sync.Cond
	caughtUp bool
	mode     string
	written  map[string]int64 // docs written per database, catch-up copies included
	synced   map[string]int   // catch-up copies ended ok
	failed   map[string]int   // catch-up copies failed
	deleted  map[string]string
	polls    int
	events   int
	security map[string]int // _security written to the target while following
	revsLim  map[string]int // _revs_limit written to the target while following
	// targetLines are the EventTargetLost and EventTargetBack details,
	// in order.
	targetLines []string
}

// waitTimeout bounds every wait on a Sync event (a loaded 2-core machine
// is slow; a wait that passes ends as soon as the event comes).
const waitTimeout = 3 * time.Minute

func startSync(t *testing.T, srcURL, dstURL string, o sofa.SyncOptions, dstOpen ...sofa.OpenOptions) *syncRun {
	t.Helper()
	return startSyncOpen(t, srcURL, dstURL, o, sofa.OpenOptions{}, append(dstOpen, sofa.OpenOptions{})[0])
}

// startSyncOpen is startSync with the source's open options too.
func startSyncOpen(t *testing.T, srcURL, dstURL string, o sofa.SyncOptions, srcOpen, dstOpen sofa.OpenOptions) *syncRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	src, err := sofa.Open(ctx, srcURL, srcOpen)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := sofa.Open(ctx, dstURL, dstOpen)
	if err != nil {
		t.Fatal(err)
	}
	r := &syncRun{t: t, cancel: cancel, done: make(chan struct{}), written: map[string]int64{},
		synced: map[string]int{}, failed: map[string]int{}, deleted: map[string]string{}, security: map[string]int{}, revsLim: map[string]int{}}
	r.changed = sync.NewCond(&r.mu)
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	addr, err := o.Metrics.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.metrics = "http://" + addr
	o.Event = func(e sofa.SyncEvent) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch e.Kind {
		case sofa.EventWatching:
			r.mode = e.Detail
		case sofa.EventCaughtUp:
			r.caughtUp = true
		case sofa.EventSynced:
			r.written[e.DB] += e.DocsWritten
			if e.Err == nil {
				r.synced[e.DB]++
			} else {
				r.failed[e.DB]++
			}
		case sofa.EventDeleted:
			r.deleted[e.DB] = e.Detail
		case sofa.EventPolled:
			r.polls++
		case sofa.EventSecurity:
			if e.Err == nil {
				r.security[e.DB]++
			}
		case sofa.EventRevsLimit:
			if e.Err == nil {
				r.revsLim[e.DB]++
			}
		case sofa.EventTargetLost, sofa.EventTargetBack:
			r.targetLines = append(r.targetLines, e.Detail)
		}
		r.events++
		r.changed.Broadcast()
	}
	if o.Copy.Logf == nil {
		o.Copy.Logf = func(format string, args ...any) { t.Logf("sync: "+format, args...) }
	}
	go func() {
		defer close(r.done)
		r.sum, r.err = sofa.Sync(ctx, src, dst, o)
		r.mu.Lock()
		r.changed.Broadcast()
		r.mu.Unlock()
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// wait blocks until cond (called under the lock) holds, the run ends or
// waitTimeout passes.
func (r *syncRun) wait(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	stop := time.AfterFunc(waitTimeout, func() {
		r.mu.Lock()
		r.changed.Broadcast()
		r.mu.Unlock()
	})
	defer stop.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for !cond() {
		select {
		case <-r.done:
			r.t.Fatalf("waiting for %s: Sync ended: %v", what, r.err)
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("waiting for %s: not after %s (written %v, synced %v, failed %v)", what, waitTimeout, r.written, r.synced, r.failed)
		}
		r.changed.Wait()
	}
}

// waitEqual waits until every database of dbs is equal on both servers
// (the independent oracle: couchtest.CompareDBs), looking again after
// each event of the run.
func (r *syncRun) waitEqual(srcURL, dstURL string, dbs ...string) {
	r.t.Helper()
	equal := func() bool {
		for _, db := range dbs {
			d, err := couchtest.CompareDBs(context.Background(), srcURL+"/"+db, dstURL+"/"+db, couchtest.CompareOptions{})
			if err != nil || !d.Equal() {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		n := r.events
		r.mu.Unlock()
		if equal() {
			return
		}
		r.wait(fmt.Sprintf("%v equal on the target", dbs), func() bool { return r.events > n })
	}
	r.t.Fatalf("%v not equal on the target after %s", dbs, waitTimeout)
}

// stop cancels the run and returns its summary and error.
func (r *syncRun) stop() (*sofa.SyncSummary, error) {
	r.cancel()
	<-r.done
	return r.sum, r.err
}

// scrape reads the metrics endpoint with Prometheus' text parser.
func (r *syncRun) scrape() map[string]*dto.MetricFamily {
	r.t.Helper()
	resp, err := http.Get(r.metrics + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return fams
}

// status reads the /status page.
func (r *syncRun) status() metrics.Status {
	r.t.Helper()
	resp, err := http.Get(r.metrics + "/status")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st metrics.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		r.t.Fatal(err)
	}
	return st
}

// metricValue is the value of the series of fam whose db label is db
// ("": the series without labels).
func metricValue(fams map[string]*dto.MetricFamily, fam, db string) (float64, bool) {
	f := fams[fam]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		got := ""
		for _, l := range m.Label {
			if l.GetName() == "db" {
				got = l.GetValue()
			}
		}
		if got != db {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// putDocs writes n new documents named prefix000.. into db.
func putDocs(t *testing.T, c *couchtest.Client, db, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.PutDoc(context.Background(), db, fmt.Sprintf("%s%03d", prefix, i), map[string]any{"n": i, "at": time.Now().UnixNano()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSync_FollowsServer: after the initial copy, writes to several
// databases, a conflict and a deletion made while running arrive; a
// database created while running is copied; one deleted on the source is
// reported and kept on the target; the metrics endpoint counts what was
// written; a cancelled run ends with its checkpoints and a restart copies
// only what changed meanwhile.
func TestSync_FollowsServer(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca := couchtest.NewClient(a.URL)
	for _, db := range []string{"s1", "s2", "s3"} {
		seed(t, a, db, 5)
	}
	enableDBUpdates(t, a)
	r := startSync(t, a.URL, b.URL, sofa.SyncOptions{PollInterval: 200 * time.Millisecond})
	r.wait("the initial copy", func() bool { return r.caughtUp })
	t.Logf("watching the source by %s", r.mode)
	if want := map[bool]string{true: "db_updates", false: "poll"}[a.Kind == couchtest.CouchDB]; r.mode != want {
		t.Errorf("mode %q, want %q", r.mode, want)
	}

	putDocs(t, ca, "s1", "new", 10)
	putDocs(t, ca, "s2", "new", 3)
	// a conflict (new_edits=false) and a deletion
	if _, err := ca.BulkDocs(ctx, "s3", false, json.RawMessage(`{"_id":"doc000","_rev":"1-ffffffffffffffffffffffffffffffff","v":"conflict"}`)); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Rev string `json:"_rev"`
	}
	if err := ca.GetJSON(ctx, "/s3/doc001", &d); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Do(ctx, "DELETE", "/s3/doc001?rev="+d.Rev, nil, nil); err != nil {
		t.Fatal(err)
	}
	seed(t, a, "s4", 7) // created while running
	r.wait("the writes on the target", func() bool {
		return r.written["s1"] >= 15 && r.written["s2"] >= 8 && r.written["s3"] >= 7 && r.written["s4"] >= 7
	})
	for _, db := range []string{"s1", "s2", "s3", "s4"} {
		couchtest.AssertEqual(t, a.URL+"/"+db, b.URL+"/"+db)
	}

	if err := ca.DeleteDB(ctx, "s2"); err != nil {
		t.Fatal(err)
	}
	// PouchDB Server can create the database again by itself: a request
	// for s2 that it took before the DELETE (a poll's GET /s2) opens it
	// after the deletion (express-pouchdb checks _all_dbs, then queues
	// the open behind the delete). sofa then finds a new, empty s2, not a
	// deleted one.
	recreated := false
	r.wait("s2's deletion reported", func() bool {
		if r.deleted["s2"] != "" {
			return true
		}
		if a.Kind != couchtest.CouchDB {
			_, err := ca.Do(ctx, "GET", "/s2", nil, nil)
			recreated = err == nil
		}
		return recreated
	})
	if _, err := couchtest.NewClient(b.URL).Do(ctx, "GET", "/s2", nil, nil); err != nil {
		t.Errorf("target's s2 after its deletion on the source: %v (want it kept)", err)
	}
	if recreated {
		t.Logf("%s created s2 again by itself after its deletion", a.Kind)
	} else if st := r.status(); st.DBs["s2"].State != metrics.StateDeleted {
		t.Errorf("status of s2 deleted on the source: %+v", st.DBs["s2"])
	}
	// Recreated on the source: its new documents are copied (next to the
	// old ones the target kept).
	if !recreated {
		seed(t, a, "s2", 0)
	}
	if _, err := ca.PutDoc(ctx, "s2", "again", map[string]any{"v": 2}); err != nil {
		t.Fatal(err)
	}
	r.wait("the recreated s2 copied", func() bool { return r.written["s2"] >= 9 })
	if _, err := couchtest.NewClient(b.URL).Do(ctx, "GET", "/s2/again", nil, nil); err != nil {
		t.Errorf("target's s2 after its recreation on the source: %v", err)
	}

	fams := r.scrape()
	for db, want := range map[string]float64{"s1": 15, "s3": 7, "s4": 7} {
		if v, ok := metricValue(fams, "sofa_db_docs_written_total", db); !ok || v != want {
			t.Errorf("sofa_db_docs_written_total{db=%q} = %v (%v), want %v", db, v, ok, want)
		}
	}
	if v, _ := metricValue(fams, "sofa_docs_written_total", ""); v != 15+8+7+7+1 {
		t.Errorf("sofa_docs_written_total = %v, want %d", v, 15+8+7+7+1)
	}
	if v, ok := metricValue(fams, "sofa_db_checkpoint_seq", "s1"); !ok || v <= 0 {
		t.Errorf("sofa_db_checkpoint_seq{db=s1} = %v (%v)", v, ok)
	}
	if v, _ := metricValue(fams, "sofa_catchup_lag_seconds", ""); v == 0 {
		t.Errorf("sofa_catchup_lag_seconds has no sample")
	}
	for _, m := range []string{"sofa_host_requests_total", "sofa_host_throttled_total", "sofa_dbs_behind"} {
		if fams[m] == nil {
			t.Errorf("metric %s not served", m)
		}
	}
	if st := r.status(); st.DBs["s2"].State == metrics.StateDeleted || st.DBs["s1"].LastCheckpoint == "" || st.DBs["s1"].DocsWritten != 15 {
		t.Errorf("status: %+v", st)
	}

	sum, err := r.stop()
	if !errors.Is(err, context.Canceled) || !sum.Interrupted {
		t.Fatalf("cancelled run: %v, %+v", err, sum)
	}
	// When PouchDB Server opened s2 again by itself, sofa may never have
	// seen it missing: then it was neither deleted nor created.
	created, deleted := fmt.Sprint(sum.Created), fmt.Sprint(sum.Deleted)
	seenDeleted := created == "[s4 s2]" && deleted == "[s2]"
	neverMissing := recreated && created == "[s4]" && deleted == "[]"
	if !seenDeleted && !neverMissing || len(sum.DeletedOnTarget) != 0 {
		t.Errorf("summary: created %v, deleted %v (on target %v; s2 recreated by the server: %v)", sum.Created, sum.Deleted, sum.DeletedOnTarget, recreated)
	}

	// Written while no run is going: a restart copies these only.
	putDocs(t, ca, "s3", "later", 4)
	r2 := startSync(t, a.URL, b.URL, sofa.SyncOptions{PollInterval: 200 * time.Millisecond})
	r2.wait("the restart's copy", func() bool { return r2.caughtUp })
	for _, d := range r2.sumNow().DBs {
		want := map[string]int64{"s3": 4}[d.Name]
		if d.DocsWritten != want || d.Status != "ok" {
			t.Errorf("restart: %s: %d written (%s), want %d", d.Name, d.DocsWritten, d.Status, want)
		}
	}
	couchtest.AssertEqual(t, a.URL+"/s3", b.URL+"/s3")
}

// sumNow waits for the initial copy and returns its summary.
func (r *syncRun) sumNow() *sofa.Summary {
	r.t.Helper()
	sum, err := r.stop()
	if !errors.Is(err, context.Canceled) || sum.CatchUp == nil {
		r.t.Fatalf("run: %v", err)
	}
	return sum.CatchUp
}

// enableDBUpdates creates CouchDB's _global_changes, which its
// `_db_updates` feed needs (a cluster set up with _cluster_setup has it;
// the test servers do not). PouchDB Server has no feed: nothing to do.
func enableDBUpdates(t *testing.T, srv *couchtest.Server) {
	t.Helper()
	if srv.Kind != couchtest.CouchDB {
		return
	}
	ctx := context.Background()
	c := couchtest.NewClient(srv.URL)
	if err := c.CreateDB(ctx, "_global_changes"); err != nil && couchtest.StatusOf(err) != 412 {
		t.Fatal(err)
	}
	// CouchDB buffers database events for up to [global_changes]
	// max_write_delay before they reach _db_updates: those of the seeding
	// would wake copies after a run has started.
	if err := couchtest.DBUpdatesSettled(ctx, srv); err != nil {
		t.Fatal(err)
	}
}

// strayMarker drops from ex the requests about enableDBUpdates' marker
// database: CouchDB may put one more of its events (an update from one of
// its shards) into _db_updates after the deletion the helper waited for,
// and a run then looks the marker up (seen in CI on a loaded machine).
func strayMarker(t *testing.T, ex []recproxy.Exchange) []recproxy.Exchange {
	t.Helper()
	var out []recproxy.Exchange
	for _, e := range ex {
		if strings.HasPrefix(e.Path, "/"+couchtest.SettledMarker) || (e.Path == "/_dbs_info" && strings.HasPrefix(e.ReqJSON, `{"keys":["`+couchtest.SettledMarker)) {
			t.Logf("a late _db_updates event of the marker database: %s %s", e.Method, e.Path)
			continue
		}
		out = append(out, e)
	}
	return out
}

// TestSync_Faults: through fault proxies on both sides, the run keeps
// going and ends equal: the _db_updates feed cut (CouchDB), changes feeds
// reset, 503 and 429 bursts, _bulk_docs answers lost after the write, and
// the target refusing every request for a while.
func TestSync_Faults(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca := couchtest.NewClient(a.URL)
	dbs := []string{"f1", "f2", "f3"}
	for _, db := range dbs {
		seed(t, a, db, 5)
	}
	enableDBUpdates(t, a)
	ps, pt := faultproxy.StartT(t, a.URL), faultproxy.StartT(t, b.URL)
	srcRules := []faultproxy.Rule{
		{Name: "feed-cut", Method: "GET", Path: `/_db_updates$`, Query: `(^|&)feed=continuous(&|$)`, Fault: faultproxy.CutChanges, CutRows: 1, Times: 3},
		{Name: "changes-reset", Method: "GET", Path: `/_changes$`, Fault: faultproxy.Reset, Probability: 0.3, Times: 6},
		{Name: "bulk-get-503", Path: `/_bulk_get$`, Fault: faultproxy.Status, Status: 503, Times: 4},
	}
	tgtRules := []faultproxy.Rule{
		{Name: "revs-diff-429", Path: `/_revs_diff$`, Fault: faultproxy.Status, Status: 429, RetryAfter: "1", Times: 3},
		{Name: "bulk-docs-lost", Path: `/_bulk_docs$`, Fault: faultproxy.ResetAfterForward, Times: 3},
	}
	if err := ps.SetRules(srcRules...); err != nil {
		t.Fatal(err)
	}
	if err := pt.SetRules(tgtRules...); err != nil {
		t.Fatal(err)
	}
	// The target's requests give up on network errors after 300 ms: a
	// target unreachable for longer fails catch-ups, which Sync retries.
	var linesMu sync.Mutex
	var backLines int // "feed back" lines
	so := sofa.SyncOptions{PollInterval: 200 * time.Millisecond, RetryInterval: 100 * time.Millisecond}
	so.Copy.Logf = func(format string, args ...any) {
		if l := fmt.Sprintf(format, args...); strings.Contains(l, "_db_updates feed back after") && strings.Contains(l, "reconnect attempt") {
			linesMu.Lock()
			backLines++
			linesMu.Unlock()
		}
	}
	r := startSync(t, ps.URL, pt.URL, so, sofa.OpenOptions{Client: couch.Options{RetryTime: 300 * time.Millisecond}})
	r.wait("the initial copy", func() bool { return r.caughtUp })

	// The target refuses everything for its next 15 requests.
	if err := pt.SetRules(append([]faultproxy.Rule{{Name: "down", Fault: faultproxy.Status, Status: 503, Times: 15}}, tgtRules...)...); err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs {
		putDocs(t, ca, db, "w", 10)
	}
	seed(t, a, "f4", 5)
	r.waitEqual(a.URL, b.URL, append(dbs, "f4")...)
	if n := pt.Rule("down").Fired; n != 15 {
		t.Errorf("the target refused %d requests, want 15", n)
	}

	// The target unreachable (connections reset) for its next 40
	// requests: catch-ups fail and are retried until it is back.
	if err := pt.SetRules(faultproxy.Rule{Name: "unreachable", Fault: faultproxy.Reset, Times: 40}); err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs {
		putDocs(t, ca, db, "x", 5)
	}
	r.waitEqual(a.URL, b.URL, dbs...)
	if n := pt.Rule("unreachable").Fired; n != 40 {
		t.Errorf("the target reset %d requests, want 40", n)
	}
	if a.Kind == couchtest.CouchDB && ps.Rule("feed-cut").Fired == 0 {
		t.Errorf("the _db_updates feed was never cut")
	}
	sum, _ := r.stop()
	t.Logf("runs %d (%d failed), reconnects %d; source faults %d, target faults %d",
		sum.Runs, sum.RunsFailed, sum.Reconnects, ps.Stats().Faults, pt.Stats().Faults)
	if sum.RunsFailed == 0 {
		t.Errorf("no catch-up failed while the target was unreachable")
	}
	if a.Kind == couchtest.CouchDB && sum.Reconnects == 0 {
		t.Errorf("no reconnect of the _db_updates feed counted")
	}
	linesMu.Lock()
	defer linesMu.Unlock()
	if a.Kind == couchtest.CouchDB && backLines == 0 {
		t.Errorf("no line said the _db_updates feed was back after its %d cuts", ps.Rule("feed-cut").Fired)
	}
}

// seedMany creates n databases named prefix0000.. on srv, one document
// each, a few at a time.
func seedMany(t *testing.T, srv *couchtest.Server, prefix string, n int) []string {
	t.Helper()
	ctx := context.Background()
	c := couchtest.NewClient(srv.URL)
	names := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		names[i] = fmt.Sprintf("%s%04d", prefix, i)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := c.CreateDB(ctx, names[i]); err != nil {
				errs <- err
				return
			}
			if _, err := c.PutDoc(ctx, names[i], "d0", map[string]any{"i": i}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return names
}

// TestSync_IdleCost: 200 databases followed cost requests per change or
// per poll, not per database: one _db_updates feed (CouchDB) and a write
// into one database wakes that database only; a poll is one _all_dbs and
// a few batched _dbs_info (CouchDB), or one _all_dbs plus one GET /db
// per database on PouchDB Server, which has neither _db_updates nor
// _dbs_info. No per-database changes feed is ever held open.
func TestSync_IdleCost(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	const n = 200
	seedMany(t, a, "i", n)
	enableDBUpdates(t, a)
	rec := recproxy.Start(t, a.URL)

	countOther := func(ex []recproxy.Exchange, db string) (total, other int) {
		for _, e := range ex {
			total++
			if strings.HasPrefix(e.Path, "/i") && !strings.HasPrefix(e.Path, "/"+db) {
				other++
			}
		}
		return total, other
	}
	if a.Kind == couchtest.CouchDB {
		r := startSync(t, rec.URL, b.URL, sofa.SyncOptions{})
		r.wait("the initial copy", func() bool { return r.caughtUp })
		if r.mode != "db_updates" {
			t.Fatalf("mode %s", r.mode)
		}
		// one request reads the feed's present position, one follows it
		feeds, positions := 0, 0
		for _, e := range rec.Recorded() {
			switch {
			case !strings.HasPrefix(e.Path, "/_db_updates"):
			case strings.Contains(e.Query, "feed=continuous"):
				feeds++
			default:
				positions++
			}
		}
		if feeds != 1 || positions != 1 {
			t.Errorf("%d continuous _db_updates requests and %d others, want 1 and 1", feeds, positions)
		}
		rec.ResetNow() // the feed stays open
		synced := r.synced["i0077"]
		if _, err := couchtest.NewClient(a.URL).PutDoc(ctx, "i0077", "woken", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		r.wait("i0077's catch-up", func() bool { return r.synced["i0077"] > synced })
		ex := strayMarker(t, rec.Recorded())
		total, other := countOther(ex, "i0077")
		t.Logf("a write into 1 of %d databases: %d requests to the source", n, total)
		// The database's Session is kept from the initial copy: a wake
		// reads its changes, with the new document inline, and nothing
		// else (no GET /db, no checkpoint read, no _bulk_get). A second
		// _changes may come from one more event coalesced after it.
		if other != 0 || total == 0 || total > 2 {
			t.Errorf("a write into one database cost %d source requests, %d about other databases", total, other)
		}
		for _, e := range ex {
			if e.Path != "/i0077/_changes" || !strings.Contains(e.Query, "include_docs=true") {
				t.Errorf("a wake asked the source %s %s?%s; want its _changes (documents inline) only", e.Method, e.Path, e.Query)
			}
		}
		r.stop()
		rec.Reset() // the feed ended with the run
	}

	// Polling (forced on CouchDB, the only way on PouchDB Server).
	r := startSync(t, rec.URL, b.URL, sofa.SyncOptions{Poll: true, PollInterval: 50 * time.Millisecond})
	r.wait("the initial copy", func() bool { return r.caughtUp })
	var p0 int
	r.wait("a poll", func() bool { p0 = r.polls; return p0 > 0 })
	rec.Reset()
	r.wait("two more polls", func() bool { return r.polls >= p0+2 })
	r.stop() // no request after this; a poll cut short counts as part of one
	ex := rec.Exchanges()
	perPoll := float64(len(ex)) / float64(r.pollsNow()-p0)
	t.Logf("idle poll of %d databases: %.1f requests per poll", n, perPoll)
	for _, e := range ex {
		if strings.Contains(e.Path, "/_changes") {
			t.Fatalf("an idle poll read a changes feed: %s %s", e.Method, e.Path)
		}
	}
	want := 8.0 // _all_dbs + _dbs_info per 100 databases, a lone first call apart
	if a.Kind == couchtest.PouchDB {
		want = 1.1 * (1 + n) // no _dbs_info: one GET /db each
	}
	if perPoll > want {
		t.Errorf("%.1f requests per idle poll of %d databases, want at most %v", perPoll, n, want)
	}
}

// A poll of the source that fails (its listing reset 60 times) is
// followed, once a poll succeeds again, by one line saying so.
func TestSync_PollBackLine(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	seed(t, a, "p1", 2)
	px := faultproxy.StartT(t, a.URL)
	lines := make(chan string, 100)
	o := sofa.SyncOptions{Poll: true, PollInterval: 50 * time.Millisecond}
	o.Copy.Logf = func(format string, args ...any) {
		select {
		case lines <- fmt.Sprintf(format, args...):
		default:
		}
	}
	r := startSyncOpen(t, px.URL, b.URL, o, sofa.OpenOptions{Client: couch.Options{RetryTime: 200 * time.Millisecond}}, sofa.OpenOptions{})
	r.wait("the initial copy", func() bool { return r.caughtUp })
	if err := px.SetRules(faultproxy.Rule{Name: "list-reset", Method: "GET", Path: `/_all_dbs$`, Fault: faultproxy.Reset, Times: 60}); err != nil {
		t.Fatal(err)
	}
	var failed, back int
	for deadline := time.After(2 * time.Minute); back == 0; {
		select {
		case l := <-lines:
			t.Log("sofa: " + l)
			switch {
			case strings.HasPrefix(l, "source: poll back after"):
				back++
				if !strings.Contains(l, "reconnect attempt") {
					t.Errorf("the back line does not count the attempts: %s", l)
				}
			case strings.HasPrefix(l, "source: poll lost:"):
				failed++
			}
		case <-deadline:
			t.Fatalf("no line said the poll was answered again (%d failed polls logged, reset fired %d times)", failed, px.Rule("list-reset").Fired)
		}
	}
	r.stop()
	if failed == 0 {
		t.Errorf("no failed poll was logged before the line saying it was answered again")
	}
}

func (r *syncRun) pollsNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.polls
}

// TestSync_DeleteMissing: with DeleteMissing, a database deleted on the
// source is deleted on the target too; the others stay.
func TestSync_DeleteMissing(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	seed(t, a, "keep", 2)
	seed(t, a, "gone", 2)
	enableDBUpdates(t, a)
	r := startSync(t, a.URL, b.URL, sofa.SyncOptions{PollInterval: 200 * time.Millisecond, DeleteMissing: true})
	r.wait("the initial copy", func() bool { return r.caughtUp })
	if err := couchtest.NewClient(a.URL).DeleteDB(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	r.wait("gone's deletion", func() bool { return r.deleted["gone"] != "" })
	cb := couchtest.NewClient(b.URL)
	if _, err := cb.Do(ctx, "GET", "/gone", nil, nil); couchtest.StatusOf(err) != 404 {
		t.Errorf("target's gone: %v, want 404", err)
	}
	if _, err := cb.Do(ctx, "GET", "/keep", nil, nil); err != nil {
		t.Errorf("target's keep: %v", err)
	}
	sum, _ := r.stop()
	if fmt.Sprint(sum.DeletedOnTarget) != "[gone]" {
		t.Errorf("deleted on the target: %v", sum.DeletedOnTarget)
	}
}

// TestSync_CreatedAndDeletedBeforeCopied: a database whose copy finds it
// gone from the source before reading anything of it (created and
// deleted between the event and the copy) is not reported deleted, and
// with DeleteMissing nothing is said deleted on the target: the target
// never held it. The source proxy answers 404 for it, as CouchDB does
// once it is deleted (CI saw the case with a database deleted before the
// run started, whose events _db_updates wrote late).
func TestSync_CreatedAndDeletedBeforeCopied(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	if a.Kind != couchtest.CouchDB {
		t.Skip("the case comes from _db_updates events: CouchDB")
	}
	seed(t, a, "keep", 2)
	enableDBUpdates(t, a)
	p := faultproxy.StartT(t, a.URL)
	// No _dbs_info either (as on CouchDB before 2.2): flash's info is
	// asked of GET /flash.
	if err := p.SetRules(faultproxy.Rule{Name: "flash-gone", Path: `^/flash(/|$)`, Fault: faultproxy.Status, Status: 404},
		faultproxy.Rule{Name: "no-dbs-info", Method: "POST", Path: `^/_dbs_info$`, Fault: faultproxy.Status, Status: 404}); err != nil {
		t.Fatal(err)
	}
	skipped := make(chan struct{})
	var once sync.Once
	o := sofa.SyncOptions{DeleteMissing: true}
	o.Copy.DebugLogf = func(format string, args ...any) {
		if strings.HasPrefix(fmt.Sprintf(format, args...), "flash: created and deleted on the source") {
			once.Do(func() { close(skipped) })
		}
	}
	r := startSync(t, p.URL, b.URL, o)
	r.wait("the initial copy", func() bool { return r.caughtUp })
	if err := couchtest.NewClient(a.URL).CreateDB(ctx, "flash"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-skipped:
	case <-time.After(waitTimeout):
		t.Fatal("flash's copy never found it gone")
	}
	sum, _ := r.stop()
	if slices.Contains(sum.Deleted, "flash") || slices.Contains(sum.DeletedOnTarget, "flash") {
		t.Errorf("deleted %v, deleted on the target %v: want no flash", sum.Deleted, sum.DeletedOnTarget)
	}
	// A catch-up that found its database gone is no failed copy.
	if sum.RunsFailed != 0 || len(sum.Failing) != 0 {
		t.Errorf("%d catch-ups failed (%v), want none", sum.RunsFailed, sum.Failing)
	}
	if _, err := couchtest.NewClient(b.URL).Do(ctx, "GET", "/flash", nil, nil); couchtest.StatusOf(err) != 404 {
		t.Errorf("target's flash: %v, want 404", err)
	}
}

// TestSync_DeleteMissingRecreated: with DeleteMissing, a database deleted
// on the source and created again before the catch-up looks at it is
// another database: the target's copy of the old one is deleted and the
// new one copied, so the target holds the new documents only (a copy into
// the old one would keep the old documents: replication never deletes).
// The source proxy answers 503 to every question about s1 until the new
// s1 exists, so the catch-up finds it recreated, never gone.
func TestSync_DeleteMissingRecreated(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	if a.Kind != couchtest.CouchDB {
		t.Skip("the deletion is told by a _db_updates row: CouchDB")
	}
	seed(t, a, "s1", 3)
	seed(t, a, "keep", 1)
	enableDBUpdates(t, a)
	p := faultproxy.StartT(t, a.URL)
	mirrorsRecreated(t, a, b, p, sofa.SyncOptions{DeleteMissing: true})
}

// TestSync_DeleteMissingRecreatedPolled: the same deletion and creation
// again, watched by listing the source (PouchDB Server has no
// _db_updates): the polls answered 503 while s1 is gone, the next poll
// finds a new database under the name (a seq behind the one copied), and
// the target's old copy is deleted before the new one is copied.
func TestSync_DeleteMissingRecreatedPolled(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	if a.Kind == couchtest.CouchDB {
		// Its instance_start_time counts seconds and its seqs are
		// opaque: a poll cannot tell a database created again within
		// the second (the run's copy finds it by its checkpoint's
		// anchor, but does not delete the old copy); sync watches
		// CouchDB through _db_updates (TestSync_DeleteMissingRecreated).
		t.Skip("a poll of CouchDB cannot tell a database recreated within the same second")
	}
	seed(t, a, "s1", 3)
	seed(t, a, "keep", 1)
	p := faultproxy.StartT(t, a.URL)
	mirrorsRecreated(t, a, b, p, sofa.SyncOptions{DeleteMissing: true, PollInterval: 50 * time.Millisecond})
}

// mirrorsRecreated runs a sync with o from a (behind p) to b, deletes s1
// on a and creates it again while p answers 503 to every question about
// it, and checks that the target's old s1 is deleted and the new one
// copied: reported deleted on the target and created, equal to the
// source.
func mirrorsRecreated(t *testing.T, a, b *couchtest.Server, p *faultproxy.Proxy, o sofa.SyncOptions) {
	t.Helper()
	ctx := context.Background()
	r := startSync(t, p.URL, b.URL, o)
	r.wait("the initial copy", func() bool { return r.caughtUp })
	hold := faultproxy.Rule{Name: "hold-s1", Path: `^/(s1(/.*)?|_dbs_info)$`, Fault: faultproxy.Status, Status: 503}
	if err := p.SetRules(hold); err != nil {
		t.Fatal(err)
	}
	ca := couchtest.NewClient(a.URL)
	if err := ca.DeleteDB(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	// The proxy's count of answers (to the catch-up, or a poll) is the
	// event waited for.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for p.Rule(hold.Name).Fired == 0 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the run never asked about s1 after its deletion")
		}
	}
	// PouchDB Server opens (and so creates) a database for a request
	// that raced its deletion: a request of the run on s1 still in
	// flight when it was deleted can bring it back, empty. No new one
	// passes the hold, so deleting it again sticks.
	for try := 1; ; try++ {
		err := ca.CreateDB(ctx, "s1")
		if err == nil {
			break
		}
		if couchtest.StatusOf(err) != http.StatusPreconditionFailed || try == 5 {
			t.Fatal(err)
		}
		if err := ca.DeleteDB(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ca.PutDoc(ctx, "s1", "fresh", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.SetRules(); err != nil {
		t.Fatal(err)
	}
	r.wait("s1's deletion reported", func() bool { return r.deleted["s1"] != "" })
	r.waitEqual(a.URL, b.URL, "s1", "keep")
	sum, _ := r.stop()
	if !slices.Contains(sum.DeletedOnTarget, "s1") || !slices.Contains(sum.Created, "s1") {
		t.Errorf("deleted on the target %v, created %v: want s1 in both", sum.DeletedOnTarget, sum.Created)
	}
}
