package limit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestLimiter_FixedNeverMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Max: 7, Fixed: true})
		srv := newSimServer(3, 10*time.Millisecond, true)
		samples := runSim(t, l, srv, 50, 2*time.Second, nil)
		for _, s := range samples {
			if s != 7 {
				t.Fatalf("fixed limiter moved to %d, want 7", s)
			}
		}
		if d := l.Stats().Decisions; len(d) != 0 {
			t.Errorf("fixed limiter logged %d decisions, want 0", len(d))
		}
	})
}

func TestLimiter_BlocksAtLimitFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Max: 2, Fixed: true})
		ctx := t.Context()
		a, _ := l.Acquire(ctx)
		b, _ := l.Acquire(ctx)
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				tok, err := l.Acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Second)
				tok.Done(Outcome{Status: 200})
			})
			synctest.Wait() // waiter i is queued before waiter i+1
		}
		if got := l.Waiting(); got != 3 {
			t.Fatalf("Waiting() = %d, want 3", got)
		}
		if got := l.InFlight(); got != 2 {
			t.Fatalf("InFlight() = %d, want 2", got)
		}
		a.Done(Outcome{Status: 200})
		a.Done(Outcome{Status: 200}) // second Done is ignored
		synctest.Wait()
		if got := l.InFlight(); got != 2 {
			t.Fatalf("InFlight() after one Done (twice) = %d, want 2", got)
		}
		b.Done(Outcome{Status: 200})
		wg.Wait()
		if fmt.Sprint(order) != "[0 1 2]" {
			t.Errorf("grant order = %v, want [0 1 2]", order)
		}
		if got := l.InFlight(); got != 0 {
			t.Errorf("InFlight() at end = %d, want 0", got)
		}
	})
}

func TestLimiter_CancelledWaiterHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Max: 1, Fixed: true})
		a, _ := l.Acquire(t.Context())
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := l.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past deadline: err = %v, want DeadlineExceeded", err)
		}
		a.Done(Outcome{Status: 200})
		if got := l.Waiting(); got != 0 {
			t.Errorf("Waiting() = %d, want 0", got)
		}
		b, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		b.Done(Outcome{Status: 200})
		if got := l.InFlight(); got != 0 {
			t.Errorf("InFlight() = %d, want 0", got)
		}
	})
}

func TestLimiter_RateCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Max: 50, Fixed: true, RPS: 20})
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var mu sync.Mutex
		n := 0
		var wg sync.WaitGroup
		for range 30 {
			wg.Go(func() {
				for {
					tok, err := l.Acquire(ctx)
					if err != nil {
						return
					}
					mu.Lock()
					n++
					mu.Unlock()
					tok.Done(Outcome{Status: 200})
				}
			})
		}
		wg.Wait()
		// 20/s with a burst of 1 over 5 s: 100 starts, plus the initial token.
		if n < 95 || n > 101 {
			t.Errorf("%d requests started in 5 s at 20 rps, want about 100", n)
		}
	})
}

func TestLimiter_RetryAfterPausesHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Max: 4, MaxPause: 3 * time.Second})
		tok, _ := l.Acquire(t.Context())
		tok.Done(Outcome{Status: 429, RetryAfter: 10 * time.Second})
		start := time.Now()
		tok, err := l.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		tok.Done(Outcome{Status: 200})
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("Acquire after Retry-After waited %s, want 3s (MaxPause)", got)
		}
	})
}

func TestLimiter_IgnoredOutcomesDoNotCount(t *testing.T) {
	l := New(Options{})
	for _, o := range []Outcome{{Ignore: true}, {Err: context.Canceled}} {
		tok, _ := l.Acquire(t.Context())
		tok.Done(o)
	}
	tok, _ := l.Acquire(t.Context())
	tok.Done(Outcome{Err: context.DeadlineExceeded})
	st := l.Stats()
	if st.Requests != 1 || st.Overloads != 1 {
		t.Errorf("Requests, Overloads = %d, %d; want 1, 1", st.Requests, st.Overloads)
	}
	if st.Limit >= DefaultInitial {
		t.Errorf("limit after a timeout = %d, want below %d", st.Limit, DefaultInitial)
	}
	if len(st.Decisions) != 1 || st.Decisions[0].Reason != ReasonOverload {
		t.Errorf("decisions = %+v, want one overload decision", st.Decisions)
	}
}

func TestLimiter_NilAdmitsEverything(t *testing.T) {
	var l *Limiter
	tok, err := l.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tok.Done(Outcome{Status: 429})
	if l.InFlight() != 0 || l.Waiting() != 0 || l.Limit() <= 1<<20 {
		t.Errorf("nil limiter: InFlight %d Waiting %d Limit %d", l.InFlight(), l.Waiting(), l.Limit())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Acquire(ctx); err == nil {
		t.Error("nil limiter Acquire with a cancelled context: err = nil")
	}
}

func TestDecisionLog_KeepsHeadAndTail(t *testing.T) {
	var d decisionLog
	const n = 1000
	for i := range n {
		d.add(Decision{From: i})
	}
	got := d.list()
	if len(got) != headCap+ringCap || d.dropped != n-headCap-ringCap {
		t.Fatalf("kept %d, dropped %d; want %d, %d", len(got), d.dropped, headCap+ringCap, n-headCap-ringCap)
	}
	if got[0].From != 0 || got[headCap-1].From != headCap-1 || got[headCap].From != n-ringCap || got[len(got)-1].From != n-1 {
		t.Errorf("order wrong: first %d, head end %d, tail start %d, last %d",
			got[0].From, got[headCap-1].From, got[headCap].From, got[len(got)-1].From)
	}
}
