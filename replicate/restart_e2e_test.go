package replicate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// TestContinuous_ServersRestarted: a continuous replication goes on
// while a writer keeps writing through a restart of the source server and
// then one of the target server (same port and data; PouchDB Server on
// disk); once the writer stops, the target holds every revision of the
// source and nothing else (couchtest.CompareDBs), and the run reconnected
// its feed.
func TestContinuous_ServersRestarted(t *testing.T) {
	ctx := context.Background()
	a := couchtest.StartWith(t, couchtest.Options{OnDisk: true})
	b := couchtest.StartWith(t, couchtest.Options{OnDisk: true})
	const db = "restarted"
	for _, s := range []*couchtest.Server{a, b} {
		if err := s.Client().CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	sep, err := couch.Probe(ctx, a.AdminURL(), couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tep, err := couch.Probe(ctx, b.AdminURL(), couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obs := newRecObserver()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := replicate.Run(rctx, sep.Server.DB(db), tep.Server.DB(db), replicate.Options{Continuous: true,
			FlushInterval: 20 * time.Millisecond, CheckpointInterval: 200 * time.Millisecond, Observer: obs,
			Log: func(s string) { t.Logf("replicate: %s", s) }})
		done <- err
	}()
	w := couchtest.StartWriter(a.Client(), "w", []string{db}, 20*time.Millisecond)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	step := func(what string, restart *couchtest.Server) {
		t.Helper()
		if err := w.WaitWritten(wctx, 20); err != nil {
			t.Fatalf("before %s: %v", what, err)
		}
		t0 := time.Now()
		if err := restart.Restart(wctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s restarted in %s", what, time.Since(t0).Round(time.Millisecond))
	}
	step("the source", a)
	step("the target", b)
	if err := w.WaitWritten(wctx, 20); err != nil {
		t.Fatal(err)
	}
	ids := w.Stop()
	n, failed := w.Written()
	t.Logf("%d documents written (%d attempts failed during the restarts)", n, failed)
	waitEqualObserved(t, obs, a.DBURL(db), b.DBURL(db))
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("continuous run ended with %v, want context.Canceled", err)
	}
	if len(ids[db]) != n {
		t.Errorf("writer: %d ids for %d writes", len(ids[db]), n)
	}
	st := obs.snapshot()
	if len(st.reconnects) == 0 {
		t.Errorf("no feed reconnect reported through a restart of the source")
	}
	t.Logf("docs_written %d for %d documents; %d reconnects, %d checkpoints", st.written, n, len(st.reconnects), len(st.checkpoints))
}

// waitEqualObserved waits until the two databases are equal (the independent
// oracle), looking again after each batch the run writes.
func waitEqualObserved(t *testing.T, obs *recObserver, src, dst string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		seen := obs.snapshot().batches
		d, err := couchtest.CompareDBs(context.Background(), src, dst, pouch)
		if err == nil && d.Equal() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not equal after 3 minutes: %v %v", err, d)
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for obs.snapshot().batches == seen && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}
