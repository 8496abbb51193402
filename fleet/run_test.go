package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sofadb/sofa/internal/limit"
	"github.com/sofadb/sofa/internal/progress"
	"github.com/sofadb/sofa/replicate"
)

func TestRun_200JobsFailuresIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dbs := names(200)
		var running, peak atomic.Int32
		job := func(ctx context.Context, db string, p DBProgress) (DBResult, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			var i int
			fmt.Sscanf(db, "db%d", &i)
			time.Sleep(time.Duration(1+i%5) * 10 * time.Millisecond)
			p.AddDocsWritten(int64(i))
			switch {
			case i == 13:
				panic("job bug")
			case i%7 == 0:
				return DBResult{DocsRead: 3}, errors.New("target said no")
			case i%11 == 0:
				return DBResult{DocsRead: 2, DocsWritten: 1, DocWriteFailures: 1,
					Failures: []replicate.DocError{{ID: "d", Rev: "1-a", Error: "forbidden", Reason: "vdu"}}}, nil
			}
			return DBResult{DocsRead: int64(i), DocsWritten: int64(i), MissingChecked: 1, MissingFound: 1}, nil
		}
		tr := progress.NewTracker()
		tr.SetTotal(len(dbs))
		sum, err := Run(t.Context(), dbs, job, Options{MaxDBs: 16, Progress: trackerProgress{tr}})
		if err != nil {
			t.Fatal(err)
		}
		if got := peak.Load(); got > 16 || got < 8 {
			t.Errorf("peak jobs in flight = %d, want in [8, 16]", got)
		}
		var failed, partial, ok int
		for i, r := range sum.DBs {
			if r.Name != dbs[i] {
				t.Fatalf("result %d is %q, want %q (input order)", i, r.Name, dbs[i])
			}
			want := StatusOK
			switch {
			case i == 13 || i%7 == 0:
				want = StatusFailed
				failed++
			case i%11 == 0:
				want = StatusPartial
				partial++
			default:
				ok++
			}
			if r.Status != want {
				t.Errorf("%s: status %s, want %s (error %q)", r.Name, r.Status, want, r.Error)
			}
			if r.Duration <= 0 {
				t.Errorf("%s: duration %v", r.Name, r.Duration)
			}
		}
		if sum.DBsFailed != failed || sum.DBsPartial != partial || sum.DBsOK != ok || sum.DBsTotal != 200 {
			t.Errorf("counts ok/partial/failed/total = %d/%d/%d/%d, want %d/%d/%d/200",
				sum.DBsOK, sum.DBsPartial, sum.DBsFailed, sum.DBsTotal, ok, partial, failed)
		}
		if !strings.Contains(sum.DBs[13].Error, "job bug") {
			t.Errorf("panicking job error = %q", sum.DBs[13].Error)
		}
		if sum.Complete() || sum.Interrupted {
			t.Errorf("Complete() = %v, Interrupted = %v; want false, false", sum.Complete(), sum.Interrupted)
		}
		s := tr.Snapshot()
		if s.DBsDone != 200 || s.DBsFailed != failed || len(s.Active) != 0 {
			t.Errorf("tracker: done %d failed %d active %d", s.DBsDone, s.DBsFailed, len(s.Active))
		}
		b, err := json.Marshal(sum)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"status":"partial"`, `"doc_write_failures":1`, `"missing_checked":1`, `"dbs_failed":` + fmt.Sprint(failed), `"duration_s":0.03`} {
			if !strings.Contains(string(b), want) {
				t.Errorf("JSON summary lacks %s", want)
			}
		}
	})
}

func TestRun_CancelStopsStartingAndLetsRunningFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var done atomic.Int32
		var checkpointed sync.Map
		job := func(ctx context.Context, db string, _ DBProgress) (DBResult, error) {
			var i int
			fmt.Sscanf(db, "db%d", &i)
			select {
			case <-time.After(time.Duration(100+i) * time.Millisecond):
				if done.Add(1) == 50 {
					cancel()
				}
				return DBResult{}, nil
			case <-ctx.Done():
				// An engine writes its last checkpoint with a context
				// that outlives the cancellation.
				cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				defer ccancel()
				time.Sleep(10 * time.Millisecond)
				if cctx.Err() == nil {
					checkpointed.Store(db, true)
				}
				return DBResult{}, ctx.Err()
			}
		}
		sum, err := Run(ctx, names(200), job, Options{MaxDBs: 8})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run err = %v, want context.Canceled", err)
		}
		if !sum.Interrupted {
			t.Error("Summary.Interrupted = false")
		}
		if sum.DBsOK < 50 || sum.DBsOK > 57 {
			t.Errorf("%d databases ok, want 50 to 57", sum.DBsOK)
		}
		if sum.DBsInterrupted == 0 || sum.DBsInterrupted > 8 {
			t.Errorf("%d interrupted, want 1 to 8", sum.DBsInterrupted)
		}
		if sum.DBsOK+sum.DBsInterrupted+sum.DBsNotStarted != 200 || sum.DBsNotStarted < 130 {
			t.Errorf("ok %d + interrupted %d + not started %d", sum.DBsOK, sum.DBsInterrupted, sum.DBsNotStarted)
		}
		n := 0
		checkpointed.Range(func(any, any) bool { n++; return true })
		if n != sum.DBsInterrupted {
			t.Errorf("%d interrupted jobs checkpointed, want %d", n, sum.DBsInterrupted)
		}
	})
}

func TestRun_IdealDurationPacesStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		starts := map[string]time.Duration{}
		job := func(_ context.Context, db string, _ DBProgress) (DBResult, error) {
			mu.Lock()
			starts[db] = time.Since(start)
			mu.Unlock()
			if db == "db0002" {
				time.Sleep(25 * time.Second) // longer than its share
			}
			return DBResult{}, nil
		}
		sum, err := Run(t.Context(), names(10), job, Options{IdealDuration: 100 * time.Second, MaxDBs: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Duration{"db0000": 0, "db0001": 10 * time.Second, "db0002": 20 * time.Second,
			"db0003": 45 * time.Second, "db0004": 45 * time.Second, "db0005": 50 * time.Second, "db0009": 90 * time.Second}
		for db, w := range want {
			if starts[db] != w {
				t.Errorf("%s started at %s, want %s", db, starts[db], w)
			}
		}
		if got := time.Duration(sum.Duration); got != 90*time.Second {
			t.Errorf("run took %s, want 90s", got)
		}
	})
}

// TestRun_FollowsLimiter runs many small jobs whose requests go through a
// limiter in front of a simulated host that rejects above k in flight: the
// databases in flight follow the host's limit instead of MaxDBs.
func TestRun_FollowsLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = 12
		l := limit.New(limit.Options{Name: "sim", Max: 64})
		var mu sync.Mutex
		active, rejected, served := 0, 0, 0
		request := func(ctx context.Context) error {
			for attempt := 0; ; attempt++ {
				tok, err := l.Acquire(ctx)
				if err != nil {
					return err
				}
				mu.Lock()
				over := active >= k
				if over {
					rejected++
				} else {
					active++
				}
				mu.Unlock()
				if over {
					tok.Done(limit.Outcome{Status: 429})
					time.Sleep(5 * time.Millisecond)
					continue
				}
				time.Sleep(10 * time.Millisecond)
				mu.Lock()
				active--
				served++
				mu.Unlock()
				tok.Done(limit.Outcome{Status: 200})
				return nil
			}
		}
		// Each database: 20 requests, 3 at a time (like an engine's
		// workers).
		job := func(ctx context.Context, db string, _ DBProgress) (DBResult, error) {
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			for range 3 {
				wg.Go(func() {
					for range 7 {
						if err := request(ctx); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			return DBResult{}, <-errs
		}
		sum, err := Run(t.Context(), names(300), job, Options{MaxDBs: 64, Limiters: []Limiter{l, l}})
		if err != nil {
			t.Fatal(err)
		}
		if !sum.Complete() {
			t.Fatalf("%d of %d ok", sum.DBsOK, sum.DBsTotal)
		}
		// 1.5 × limit / 3 requests per db: about 6 once the limit settles
		// near k, at most k while slow start overshoots to 2k; far from
		// MaxDBs either way.
		if sum.Concurrency.Peak > k {
			t.Errorf("peak databases in flight = %d, want <= %d", sum.Concurrency.Peak, k)
		}
		if len(sum.Concurrency.Changes) == 0 || len(sum.Hosts) != 1 {
			t.Errorf("summary lacks decisions: %d target changes, %d hosts", len(sum.Concurrency.Changes), len(sum.Hosts))
		}
		// Best possible: k requests at once, 10 ms each.
		best := time.Duration(300*21/k) * 10 * time.Millisecond
		if got := time.Duration(sum.Duration); got > best*100/80 {
			t.Errorf("run took %s, want within 25%% of %s", got, best)
		}
		if frac := float64(rejected) / float64(served+rejected); frac > 0.02 {
			t.Errorf("%.1f%% of requests rejected", 100*frac)
		}
		t.Logf("peak dbs %d, duration %s (best %s), rejected %d of %d", sum.Concurrency.Peak, time.Duration(sum.Duration), best, rejected, served+rejected)
	})
}

// trackerProgress is a Progress over a progress.Tracker, as cmd/sofa's
// display is.
type trackerProgress struct{ t *progress.Tracker }

func (p trackerProgress) Begin(db string) DBProgress { return p.t.Begin(db) }
func (p trackerProgress) End(db string, d DBProgress, failed bool) {
	p.t.End(d.(*progress.DB), failed)
}
func (p trackerProgress) EndInterrupted(db string, d DBProgress) {
	p.t.EndInterrupted(d.(*progress.DB))
}

// A database whose server is lost (replicate.ErrUnreachable) stops a
// StopWhenLost run: the databases before it are copied, none starts
// after it, and Run returns its error; without StopWhenLost every
// database is tried.
func TestRun_StopWhenLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dbs := names(10)
		lost := fmt.Errorf("http://h: cannot connect: %w", replicate.ErrUnreachable)
		job := func(ctx context.Context, db string, p DBProgress) (DBResult, error) {
			time.Sleep(10 * time.Millisecond)
			if db >= dbs[3] {
				return DBResult{}, lost
			}
			return DBResult{DocsWritten: 1}, nil
		}
		sum, err := Run(t.Context(), dbs, job, Options{MaxDBs: 1, Fixed: true, StopWhenLost: true})
		if !errors.Is(err, replicate.ErrUnreachable) || !strings.Contains(err.Error(), dbs[3]) {
			t.Errorf("err = %v, want the lost server's, naming %s", err, dbs[3])
		}
		if sum.DBsOK != 3 || sum.DBsFailed != 1 || sum.DBsNotStarted != 6 {
			t.Errorf("ok %d, failed %d, not started %d; want 3, 1, 6", sum.DBsOK, sum.DBsFailed, sum.DBsNotStarted)
		}
		sum, err = Run(t.Context(), dbs, job, Options{MaxDBs: 1, Fixed: true})
		if err != nil || sum.DBsOK != 3 || sum.DBsFailed != 7 {
			t.Errorf("without StopWhenLost: err %v, ok %d, failed %d; want nil, 3, 7", err, sum.DBsOK, sum.DBsFailed)
		}
	})
}

// nilBegin is a Progress whose Begin returns nil.
type nilBegin struct{}

func (nilBegin) Begin(string) DBProgress      { return nil }
func (nilBegin) End(string, DBProgress, bool) {}

// A Progress whose Begin returns nil (as its doc allows) is no panic:
// the counters go nowhere and the jobs run.
func TestRun_ProgressBeginNil(t *testing.T) {
	job := func(ctx context.Context, db string, p DBProgress) (DBResult, error) {
		p.AddDocsWritten(1)
		return DBResult{DocsWritten: 1}, nil
	}
	sum, err := Run(t.Context(), names(3), job, Options{Progress: nilBegin{}})
	if err != nil || sum.DBsOK != 3 || sum.DocsWritten != 3 {
		t.Fatalf("%+v, %v: want 3 ok", sum, err)
	}
}
