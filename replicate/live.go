package replicate

import (
	"sync"
	"time"
)

// behindAfter is how long a change may wait unwritten before the run is
// said to be behind: four flush intervals, at least 2 s, so that the
// normal batching delay never makes "behind / caught up" flap.
func (o *Options) behindAfter() time.Duration {
	return max(2*time.Second, 4*o.FlushInterval)
}

// liveness tells the Observer (and the log) when the run falls behind and
// when it has caught up. Caught up: the feed said it had nothing more (the
// catch-up feed ended) and every row read since is written. Behind: a row
// read more than behindAfter ago is not written yet.
type liveness struct {
	mu       sync.Mutex
	obs      Observer
	logf     func(string, ...any)
	after    time.Duration
	open     map[int64]time.Time // batches with the workers: first row's arrival
	held     time.Time           // first row of the batch being cut; zero: none
	feedDone bool
	state    int8 // 0 not said yet, 1 caught up, -1 behind
	stop     chan struct{}
}

func newLiveness(o *Options, logf func(string, ...any)) *liveness {
	return &liveness{obs: o.Observer, logf: logf, after: o.behindAfter(), open: map[int64]time.Time{}, stop: make(chan struct{})}
}

// watch checks for the behind edge until close: rows may wait with no
// event to look at them.
func (l *liveness) watch() {
	t := time.NewTicker(l.after / 4)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.check()
		}
	}
}

func (l *liveness) close() { close(l.stop) }

func (l *liveness) holding(at time.Time) {
	l.mu.Lock()
	if l.held.IsZero() {
		l.held = at
	}
	l.mu.Unlock()
}

func (l *liveness) started(n int64, first time.Time) {
	l.mu.Lock()
	l.open[n] = first
	l.held = time.Time{}
	l.mu.Unlock()
}

func (l *liveness) done(n int64) {
	l.mu.Lock()
	delete(l.open, n)
	l.mu.Unlock()
	l.check()
}

// feedEnded: the catch-up feed ended (the source had nothing more).
func (l *liveness) feedEnded() {
	l.mu.Lock()
	l.feedDone = true
	l.mu.Unlock()
	l.check()
}

func (l *liveness) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	oldest := l.held
	for _, t := range l.open {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	switch {
	case oldest.IsZero() && l.feedDone:
		l.edge(1, "caught up: every change read is written")
	case !oldest.IsZero() && time.Since(oldest) > l.after:
		l.edge(-1, "behind: a change read "+time.Since(oldest).Round(100*time.Millisecond).String()+" ago is not written yet")
	}
}

func (l *liveness) edge(s int8, msg string) {
	if l.state == s {
		return
	}
	l.state = s
	l.obs.CaughtUp(s == 1)
	l.logf("%s", msg)
}
