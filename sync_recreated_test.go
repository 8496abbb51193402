package sofa_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/metrics"
)

// TestSync_DeleteMissingRecreatedDuringFirstCopy (found by a new user on
// CouchDB 3.5, 2 runs in 20: a database created on the source during a
// continuous run, deleted and created again 0.7 s later, kept the old
// database's documents on the target): its first copy, having written
// part of the old database, found it gone ("not found") when the source
// already held the new one, so it failed instead of reporting a
// deletion; with DeleteMissing, the next copy must delete the target's
// copy of the old database before copying the new one, as it does for a
// database seen deleted after a copy.
func TestSync_DeleteMissingRecreatedDuringFirstCopy(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	if a.Kind != couchtest.CouchDB {
		t.Skip("the deletion is told by a _db_updates row: CouchDB")
	}
	seed(t, a, "keep", 1)
	enableDBUpdates(t, a)
	p := faultproxy.StartT(t, a.URL) // the source, where s1's reads are held
	noted := make(chan struct{})
	var once sync.Once
	o := sofa.SyncOptions{DeleteMissing: true}
	o.Copy.DebugLogf = func(format string, args ...any) {
		if strings.HasPrefix(fmt.Sprintf(format, args...), "s1: deleted on the source while it is copied") {
			once.Do(func() { close(noted) })
		}
	}
	r := startSync(t, p.URL, b.URL, o)
	r.wait("the initial copy", func() bool { return r.caughtUp })
	// s1, created during the run, hidden from it (503) until it holds
	// its documents; then its first copy reads one batch (and writes
	// it), and its further reads are answered 503 (retried)
	hide := faultproxy.Rule{Name: "hide-s1", Path: `^/(s1(/.*)?|_dbs_info)$`, Fault: faultproxy.Status, Status: 503}
	if err := p.SetRules(hide); err != nil {
		t.Fatal(err)
	}
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	if err := ca.CreateDB(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	var docs []json.RawMessage
	for i := range 1500 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"old%04d","n":%d}`, i, i)))
	}
	if _, err := ca.BulkDocs(ctx, "s1", true, docs...); err != nil {
		t.Fatal(err)
	}
	stall := faultproxy.Rule{Name: "stall-s1", Method: "POST", Path: `^/s1/_bulk_get$`, After: 1, Fault: faultproxy.Status, Status: 503}
	if err := p.SetRules(stall); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for {
		var info struct {
			DocCount int `json:"doc_count"`
		}
		if _, err := cb.Do(ctx, "GET", "/s1", nil, &info); err == nil && info.DocCount > 0 && p.Rule(stall.Name).Fired > 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("s1's first copy never wrote part of it")
		}
	}
	// deleted and created again while the copy waits on its reads, which
	// then find the old database gone
	if err := ca.DeleteDB(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-noted:
	case <-time.After(waitTimeout):
		t.Fatal("the run never noted s1's deletion during its copy")
	}
	if err := ca.CreateDB(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.PutDoc(ctx, "s1", "fresh", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	var failed int // the copies of s1 failed so far (while hidden, say)
	r.wait("the count of s1's failed copies", func() bool { failed = r.failed["s1"]; return true })
	gone := faultproxy.Rule{Name: "s1-read-gone", Method: "POST", Path: `^/s1/_bulk_get$`, Fault: faultproxy.Status, Status: 404,
		Body: `{"error":"not_found","reason":"Database does not exist."}`}
	if err := p.SetRules(gone); err != nil {
		t.Fatal(err)
	}
	r.wait("s1's first copy failed", func() bool { return r.failed["s1"] > failed })
	if err := p.SetRules(); err != nil {
		t.Fatal(err)
	}
	r.waitEqual(a.URL, b.URL, "s1", "keep")
	sum, _ := r.stop()
	if !slices.Contains(sum.DeletedOnTarget, "s1") {
		t.Errorf("deleted on the target %v: want s1 (its old copy)", sum.DeletedOnTarget)
	}
}

// TestSync_DeleteMissingRecreatedWhileStopped (found by a tester on
// CouchDB 3.5): a database copied by one run, deleted and created again
// on the source while no run goes on, and found so by the next run's
// catch-up (its checkpoint judged: another instance_start_time, or on
// PouchDB Server a seq gone back and the anchor revision gone), is with
// DeleteMissing handled as one seen recreated while running: the
// target's copy of the old database is deleted and the new one copied
// afresh, one line saying so, and the catch-up's warning about the
// recreation is printed once, not twice. Without DeleteMissing the
// target keeps the old documents next to the new one, as it always did.
func TestSync_DeleteMissingRecreatedWhileStopped(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca := couchtest.NewClient(a.URL)
	var docs []json.RawMessage
	for i := range 400 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"old%04d","n":%d}`, i, i)))
	}
	for _, db := range []string{"one", "kept"} {
		if err := ca.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.BulkDocs(ctx, db, true, docs...); err != nil {
			t.Fatal(err)
		}
	}
	seed(t, a, "keep", 1)
	enableDBUpdates(t, a)
	r := startSync(t, a.URL, b.URL, sofa.SyncOptions{DeleteMissing: true})
	r.wait("the first run's copy", func() bool { return r.caughtUp })
	if _, err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	// While no run goes on: both deleted and created again, one new
	// document each.
	for _, db := range []string{"one", "kept"} {
		if err := ca.RecreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.PutDoc(ctx, db, "fresh", map[string]any{"v": 1}); err != nil {
			t.Fatal(err)
		}
	}
	// Their _db_updates rows are in the feed before the next run reads
	// its position (CouchDB writes them up to max_write_delay late): only
	// the checkpoint can tell that run of the recreation.
	if err := couchtest.DBUpdatesSettled(ctx, a); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		l := fmt.Sprintf(format, args...)
		t.Logf("sync: %s", l)
		mu.Lock()
		lines = append(lines, l)
		mu.Unlock()
	}
	// "kept" is left to a run without DeleteMissing: the old documents stay.
	o := sofa.SyncOptions{DeleteMissing: true}
	o.Copy.Selection.Exclude = []string{"kept"}
	o.Copy.Logf = logf
	r2 := startSync(t, a.URL, b.URL, o)
	r2.wait("the second run's catch-up", func() bool { return r2.caughtUp })
	// The catch-up copied it: nothing to wait for.
	couchtest.AssertEqual(t, a.URL+"/one", b.URL+"/one")
	couchtest.AssertEqual(t, a.URL+"/keep", b.URL+"/keep")
	sum, _ := r2.stop()
	if !slices.Contains(sum.DeletedOnTarget, "one") {
		t.Errorf("deleted on the target %v: want one (its old copy)", sum.DeletedOnTarget)
	}
	if d := r2.deleted["one"]; !strings.Contains(d, "deleted on the target") {
		t.Errorf("one's deletion event says %q: want its copy deleted on the target", d)
	}
	mu.Lock()
	var said, recreated int
	for _, l := range lines {
		if !strings.HasPrefix(l, "one: ") {
			continue
		}
		if strings.Contains(l, "deleted on the target") {
			said++
		}
		if strings.Contains(l, "recreated") {
			recreated++
		}
	}
	mu.Unlock()
	if said != 1 {
		t.Errorf("%d lines said one's old copy was deleted on the target, want 1", said)
	}
	if recreated > 1 {
		t.Errorf("%d lines about one's recreation, want at most 1", recreated)
	}

	// Without DeleteMissing: said once, and the old documents stay.
	lines = nil
	o = sofa.SyncOptions{}
	o.Copy.Selection.Include = []string{"kept"}
	o.Copy.Logf = logf
	r3 := startSync(t, a.URL, b.URL, o)
	r3.wait("the third run's catch-up", func() bool { return r3.caughtUp })
	var info struct {
		DocCount int `json:"doc_count"`
	}
	if _, err := couchtest.NewClient(b.URL).Do(ctx, "GET", "/kept", nil, &info); err != nil {
		t.Fatal(err)
	}
	if info.DocCount != 401 {
		t.Errorf("the target's kept holds %d documents, want 401 (the old ones kept, the new one added)", info.DocCount)
	}
	sum, _ = r3.stop()
	if len(sum.DeletedOnTarget) != 0 {
		t.Errorf("deleted on the target %v without DeleteMissing", sum.DeletedOnTarget)
	}
	mu.Lock()
	defer mu.Unlock()
	recreated = 0
	for _, l := range lines {
		if strings.HasPrefix(l, "kept: ") && strings.Contains(l, "recreated") {
			recreated++
		}
	}
	if recreated != 1 {
		t.Errorf("%d lines about kept's recreation, want 1", recreated)
	}
}

// TestSync_DeleteMissingSourceRestarted: a source server restarted while
// no run goes on is no recreation of its databases, even where its
// instance_start_time is the process's start (PouchDB Server): with
// DeleteMissing the next run's catch-up deletes no copy on the target
// (the checkpoint's anchor revision is still known, the seq not ahead).
func TestSync_DeleteMissingSourceRestarted(t *testing.T) {
	ctx := context.Background()
	a := couchtest.StartWith(t, couchtest.Options{OnDisk: true})
	b := couchtest.Start(t)
	seed(t, a, "r1", 5)
	enableDBUpdates(t, a)
	o := sofa.SyncOptions{DeleteMissing: true}
	r := startSync(t, a.URL, b.URL, o)
	r.wait("the first run's copy", func() bool { return r.caughtUp })
	if _, err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if err := a.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := startSync(t, a.URL, b.URL, o)
	r2.wait("the second run's catch-up", func() bool { return r2.caughtUp })
	sum, _ := r2.stop()
	if len(sum.DeletedOnTarget) != 0 || len(sum.Deleted) != 0 {
		t.Errorf("deleted %v, on the target %v: want none (the source was restarted, not recreated)", sum.Deleted, sum.DeletedOnTarget)
	}
	couchtest.AssertEqual(t, a.URL+"/r1", b.URL+"/r1")
}

// TestSync_DeletedWhileStopped: a database deleted on the source while no
// run went on, whose copy on the target holds the first run's
// checkpoint, is found at the next run's start: reported as deleted on
// the source, and deleted on the target with DeleteMissing (kept
// without); a database of the target's own (no checkpoint from this
// source) is left alone and not reported.
func TestSync_DeletedWhileStopped(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	for _, db := range []string{"gone", "gone2", "stays"} {
		seed(t, a, db, 3)
	}
	seed(t, b, "own", 2)
	r := startSync(t, a.URL, b.URL, sofa.SyncOptions{})
	r.wait("the first run's copy", func() bool { return r.caughtUp })
	if _, err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	for _, db := range []string{"gone", "gone2"} {
		if err := ca.DeleteDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(db string) bool {
		_, err := cb.Do(ctx, "GET", "/"+db, nil, nil)
		return err == nil
	}
	// Without DeleteMissing: reported, kept.
	o := sofa.SyncOptions{}
	o.Copy.Selection.Exclude = []string{"gone2"}
	r2 := startSync(t, a.URL, b.URL, o)
	r2.wait("the second run's catch-up", func() bool { return r2.caughtUp })
	sum, _ := r2.stop()
	if !slices.Contains(sum.Deleted, "gone") || slices.Contains(sum.Deleted, "own") || slices.Contains(sum.Deleted, "gone2") || !exists("gone") {
		t.Errorf("without DeleteMissing: deleted %v (target holds gone: %v), want gone reported and kept, own and gone2 (not selected) not reported", sum.Deleted, exists("gone"))
	}
	// With it: deleted on the target.
	r3 := startSync(t, a.URL, b.URL, sofa.SyncOptions{DeleteMissing: true})
	r3.wait("the third run's catch-up", func() bool { return r3.caughtUp })
	sum, _ = r3.stop()
	slices.Sort(sum.DeletedOnTarget)
	if !slices.Equal(sum.DeletedOnTarget, []string{"gone", "gone2"}) || exists("gone") || exists("gone2") || !exists("own") || !exists("stays") {
		t.Errorf("with DeleteMissing: deleted on the target %v; want gone and gone2 deleted, own and stays kept", sum.DeletedOnTarget)
	}
	if d := r3.deleted["gone"]; !strings.Contains(d, "deleted on the target") {
		t.Errorf("gone's deletion event says %q: want its copy deleted on the target", d)
	}
}

// TestSync_EmptyDeletedWhileStopped (found by a tester on CouchDB 3.5):
// an empty database is copied without a write, so its copy held no mark
// of this source, and when it was deleted on the source while no run went
// on the next run neither reported it nor deleted it with DeleteMissing.
// A run that writes nothing now stores its checkpoint, as a mark.
func TestSync_EmptyDeletedWhileStopped(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	seed(t, a, "empty", 0)
	seed(t, a, "stays", 1)
	r := startSync(t, a.URL, b.URL, sofa.SyncOptions{})
	r.wait("the first run's copy", func() bool { return r.caughtUp })
	// and one created empty while the run follows the source
	if err := ca.CreateDB(ctx, "empty2"); err != nil {
		t.Fatal(err)
	}
	r.wait("the new database's copy", func() bool { return r.synced["empty2"] > 0 })
	if _, err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	for _, db := range []string{"empty", "empty2"} {
		if _, err := cb.Do(ctx, "GET", "/"+db, nil, nil); err != nil {
			t.Fatalf("the first run did not copy %s: %v", db, err)
		}
		if err := ca.DeleteDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	r2 := startSync(t, a.URL, b.URL, sofa.SyncOptions{DeleteMissing: true})
	r2.wait("the second run's catch-up", func() bool { return r2.caughtUp })
	// /status says so too (it said idle, pending -1)
	if st := r2.status(); st.DBs["empty"].State != metrics.StateDeleted {
		t.Errorf("/status says %+v for the database deleted while no run went on, want %s", st.DBs["empty"], metrics.StateDeleted)
	}
	sum, _ := r2.stop()
	slices.Sort(sum.DeletedOnTarget)
	if !slices.Equal(sum.DeletedOnTarget, []string{"empty", "empty2"}) {
		t.Errorf("deleted on the target %v, want the empty databases", sum.DeletedOnTarget)
	}
	for _, db := range []string{"empty", "empty2"} {
		if _, err := cb.Do(ctx, "GET", "/"+db, nil, nil); err == nil {
			t.Errorf("%s is still on the target", db)
		}
	}
}
