package sofa_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestSync_Checkpoints: a wake writes no checkpoint; the run's timer
// writes one an interval after it; the end of the run writes the others,
// so that a restart reads none of the changes again (its catch-up checks
// no revision of a database that did not change meanwhile).
func TestSync_Checkpoints(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca := couchtest.NewClient(a.URL)
	for _, db := range []string{"c1", "c2"} {
		seed(t, a, db, 3)
	}
	enableDBUpdates(t, a)
	// No timer checkpoint within the test: only the end of the run can
	// cover c1's wake.
	long := sofa.SyncOptions{PollInterval: 200 * time.Millisecond}
	long.Copy.Engine.CheckpointInterval = time.Hour
	r := startSync(t, a.URL, b.URL, long)
	r.wait("the initial copy", func() bool { return r.caughtUp })
	cp0 := r.status().DBs["c1"].LastCheckpoint
	putDocs(t, ca, "c1", "w", 4)
	r.wait("c1's wake", func() bool { return r.written["c1"] >= 3+4 })
	if cp := r.status().DBs["c1"].LastCheckpoint; cp != cp0 {
		t.Errorf("a wake checkpointed c1 (%s, after the initial copy %s): want the timer or the end to", cp, cp0)
	}
	if _, err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	r2 := startSync(t, a.URL, b.URL, long)
	r2.wait("the restart's catch-up", func() bool { return r2.caughtUp })
	for _, d := range r2.sumNow().DBs {
		if d.MissingChecked != 0 || d.DocsWritten != 0 {
			t.Errorf("restart: %s: %d revisions checked, %d written; want none (the end of the last run checkpointed it)", d.Name, d.MissingChecked, d.DocsWritten)
		}
	}

	// The timer: a wake is checkpointed an interval later, the run going on.
	short := sofa.SyncOptions{PollInterval: 200 * time.Millisecond}
	short.Copy.Engine.CheckpointInterval = 300 * time.Millisecond
	r3 := startSync(t, a.URL, b.URL, short)
	r3.wait("the third run's catch-up", func() bool { return r3.caughtUp })
	cp0 = r3.status().DBs["c2"].LastCheckpoint
	putDocs(t, ca, "c2", "w", 2)
	r3.wait("c2's wake", func() bool { return r3.written["c2"] >= 2 })
	deadline := time.Now().Add(waitTimeout)
	for r3.status().DBs["c2"].LastCheckpoint == cp0 {
		if time.Now().After(deadline) {
			t.Fatalf("c2 not checkpointed %s after its wake (checkpoint interval 300 ms)", waitTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	couchtest.AssertEqual(t, a.URL+"/c2", b.URL+"/c2")
}

// TestSync_ServersRestarted: a whole-server continuous run goes on while
// a writer keeps writing into three databases through a restart of the
// source server and then one of the target server (same port and data;
// PouchDB Server on disk); once the writer stops, every database is equal
// on the target (couchtest.CompareDBs: every revision, nothing more).
func TestSync_ServersRestarted(t *testing.T) {
	ctx := context.Background()
	a := couchtest.StartWith(t, couchtest.Options{OnDisk: true})
	b := couchtest.StartWith(t, couchtest.Options{OnDisk: true})
	dbs := []string{"r1", "r2", "r3"}
	for _, db := range dbs {
		seed(t, a, db, 3)
	}
	enableDBUpdates(t, a)
	o := sofa.SyncOptions{PollInterval: 200 * time.Millisecond, RetryInterval: 100 * time.Millisecond}
	o.Copy.Engine.CheckpointInterval = 300 * time.Millisecond
	r := startSync(t, a.URL, b.URL, o)
	r.wait("the initial copy", func() bool { return r.caughtUp })
	w := couchtest.StartWriter(couchtest.NewClient(a.URL), "w", dbs, 20*time.Millisecond)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for _, s := range []struct {
		what string
		srv  *couchtest.Server
	}{{"the source", a}, {"the target", b}} {
		if err := w.WaitWritten(wctx, 30); err != nil {
			t.Fatalf("before restarting %s: %v", s.what, err)
		}
		t0 := time.Now()
		if err := s.srv.Restart(wctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s restarted in %s", s.what, time.Since(t0).Round(time.Millisecond))
	}
	if err := w.WaitWritten(wctx, 30); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	n, failed := w.Written()
	t.Logf("%d documents written (%d attempts failed during the restarts)", n, failed)
	r.waitEqual(a.URL, b.URL, dbs...)
	sum, err := r.stop()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	t.Logf("runs %d (%d failed), reconnects %d, docs_written %d", sum.Runs, sum.RunsFailed, sum.Reconnects, sum.DocsWritten)
	if len(sum.Failing) != 0 {
		t.Errorf("databases failing at the end: %v", sum.Failing)
	}
}
