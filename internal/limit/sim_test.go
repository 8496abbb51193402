package limit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// simServer is a simulated CouchDB host with capacity k. In reject mode it
// answers 429 at once to any request beyond k in flight; otherwise extra
// requests queue for one of k workers, so only latency grows.
type simServer struct {
	service time.Duration
	reject  bool

	mu     sync.Mutex
	k      int
	active int
	sem    chan struct{} // queue mode: k worker slots

	served, rejected atomic.Int64
}

func newSimServer(k int, service time.Duration, reject bool) *simServer {
	s := &simServer{k: k, service: service, reject: reject}
	if !reject {
		s.sem = make(chan struct{}, k)
	}
	return s
}

// setCapacity changes k (reject mode only).
func (s *simServer) setCapacity(k int) {
	s.mu.Lock()
	s.k = k
	s.mu.Unlock()
}

// do serves one request and returns its status.
func (s *simServer) do(ctx context.Context) int {
	if s.reject {
		s.mu.Lock()
		if s.active >= s.k {
			s.mu.Unlock()
			s.rejected.Add(1)
			return 429
		}
		s.active++
		s.mu.Unlock()
		time.Sleep(s.service)
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
		s.served.Add(1)
		return 200
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	time.Sleep(s.service)
	<-s.sem
	s.served.Add(1)
	return 200
}

// runSim drives clients eager workers against srv through l for d, sampling
// the limit every 5 ms, and returns the samples.
func runSim(t *testing.T, l *Limiter, srv *simServer, clients int, d time.Duration, during func(elapsed time.Duration)) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				tok, err := l.Acquire(ctx)
				if err != nil {
					return
				}
				st := srv.do(ctx)
				if st == 0 {
					tok.Done(Outcome{Ignore: true})
					return
				}
				tok.Done(Outcome{Status: st})
				if st == 429 {
					time.Sleep(5 * time.Millisecond) // the client's retry backoff
				}
			}
		})
	}
	var samples []int
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			samples = append(samples, l.Limit())
			if during != nil {
				during(time.Since(start))
			}
		}
	}
	wg.Wait()
	return samples
}

func median(xs []int) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func secondHalf(xs []int) []int { return xs[len(xs)/2:] }

func TestLimiter_Converges429(t *testing.T) {
	for _, k := range []int{5, 20, 50} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(Options{Name: "sim", Max: 64, Initial: 4})
				srv := newSimServer(k, 10*time.Millisecond, true)
				samples := runSim(t, l, srv, 200, 20*time.Second, nil)
				got := median(secondHalf(samples))
				lo := int(0.7 * float64(k))
				if got < lo || got > k {
					t.Errorf("k=%d: median limit over second half = %d, want in [%d, %d]", k, got, lo, k)
				}
				served, rejected := srv.served.Load(), srv.rejected.Load()
				if frac := float64(rejected) / float64(served+rejected); frac > 0.02 {
					t.Errorf("k=%d: %.2f%% of requests rejected (%d of %d), want < 2%%", k, 100*frac, rejected, served+rejected)
				}
				// Throughput against the best fixed setting (k in flight).
				best := float64(20*time.Second/(10*time.Millisecond)) * float64(k)
				if ratio := float64(served) / best; ratio < 0.85 {
					t.Errorf("k=%d: served %d = %.2f of the best fixed setting, want >= 0.85", k, served, ratio)
				}
				st := l.Stats()
				if st.Overloads != rejected {
					t.Errorf("Stats().Overloads = %d, want %d", st.Overloads, rejected)
				}
				t.Logf("k=%d median=%d served=%d rejected=%d decisions=%d(+%d dropped)", k, got, served, rejected, len(st.Decisions), st.DecisionsDropped)
			})
		})
	}
}

func TestLimiter_ConvergesOnLatency(t *testing.T) {
	for _, k := range []int{8, 20} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(Options{Name: "sim", Max: 64})
				srv := newSimServer(k, 10*time.Millisecond, false)
				samples := runSim(t, l, srv, 200, 30*time.Second, nil)
				got := median(secondHalf(samples))
				// Queueing alone costs no throughput, so the controller
				// only acts on a median latency 1.5x the baseline, twice
				// in a row (robust to one slow moment): it settles between
				// 0.9K and about 1.5K.
				lo, hi := int(0.7*float64(k)), int(1.5*float64(k))
				if got < lo || got > hi {
					t.Errorf("k=%d: median limit over second half = %d, want in [%d, %d]", k, got, lo, hi)
				}
				best := float64(30*time.Second/(10*time.Millisecond)) * float64(k)
				if ratio := float64(srv.served.Load()) / best; ratio < 0.85 {
					t.Errorf("k=%d: served %.2f of capacity, want >= 0.85", k, ratio)
				}
				t.Logf("k=%d median=%d served=%d", k, got, srv.served.Load())
			})
		})
	}
}

func TestLimiter_RecoversAfterOverloadClears(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Name: "sim", Max: 64})
		srv := newSimServer(10, 10*time.Millisecond, true)
		var switched bool
		samples := runSim(t, l, srv, 200, 40*time.Second, func(el time.Duration) {
			if !switched && el >= 10*time.Second {
				switched = true
				srv.setCapacity(40)
			}
		})
		// The median of the 5 s before the switch (samples every 5 ms):
		// one sample may catch the limit probing one above the capacity
		// before the 429s cut it (an instant's sample flaked at 11).
		if got := median(samples[len(samples)/8 : len(samples)/4]); got < 7 || got > 10 {
			t.Errorf("median limit at capacity 10 = %d, want in [7, 10]", got)
		}
		last := samples[len(samples)*3/4:] // the last 10 s
		if got := median(last); got < 28 || got > 40 {
			t.Errorf("median limit after capacity rose to 40 = %d, want in [28, 40]", got)
		}
	})
}

func TestLimiter_StaysBelowMaxAndAboveMin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Max: 12, Min: 3, LatencyTolerance: -1})
		srv := newSimServer(1000, 10*time.Millisecond, true)
		samples := runSim(t, l, srv, 100, 5*time.Second, nil)
		if m := slices.Max(samples); m != 12 {
			t.Errorf("max limit = %d, want 12 (Max) with an unbounded server", m)
		}
		l2 := New(Options{Max: 12, Min: 3})
		srv2 := newSimServer(1, 10*time.Millisecond, true)
		samples = runSim(t, l2, srv2, 100, 5*time.Second, nil)
		if m := slices.Min(samples); m < 3 {
			t.Errorf("min limit = %d, want >= 3 (Min)", m)
		}
	})
}

// A single-threaded server (PouchDB Server) queues every request beyond
// the one it serves, so its latency rises with any load: latency alone
// must not drive the limit below LatencyFloor, where the server would sit
// idle between round trips. Rejections (429) still lower it further.
func TestLimiter_LatencyFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Name: "sim", Max: 64, Initial: 1}) // baseline measured without a queue
		srv := newSimServer(1, 2*time.Millisecond, false)
		samples := runSim(t, l, srv, 100, 20*time.Second, nil)
		if m := slices.Min(secondHalf(samples)); m < DefaultLatencyFloor {
			t.Errorf("queueing server: min limit over the second half = %d, want >= %d", m, DefaultLatencyFloor)
		}
		if got := median(secondHalf(samples)); got > 4*DefaultLatencyFloor {
			t.Errorf("queueing server: median limit = %d, want near the floor %d (latency rises with every request)", got, DefaultLatencyFloor)
		}
		var latency bool
		for _, d := range l.Stats().Decisions {
			latency = latency || d.Reason == ReasonLatency
		}
		if !latency {
			t.Error("no latency decision against a queueing server")
		}

		l2 := New(Options{Name: "sim", Max: 64})
		srv2 := newSimServer(1, 2*time.Millisecond, true)
		samples = runSim(t, l2, srv2, 100, 20*time.Second, nil)
		if got := median(secondHalf(samples)); got >= DefaultLatencyFloor {
			t.Errorf("rejecting server of capacity 1: median limit = %d, want below the latency floor %d", got, DefaultLatencyFloor)
		}
	})
}
