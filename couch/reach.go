package couch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// reach follows whether a Client's server answers: it stops answering
// when an attempt gets no answer at all (connection refused or reset, a
// timeout: a NetError that is retried), and answers again when an
// attempt sent after that gets an answer, whatever its status. Watchers
// (WatchReach) hear of each edge once, however many requests are in
// flight or retried meanwhile.
type reach struct {
	down atomic.Bool // an outage is under way: the callers' fast path
	mu   sync.Mutex
	// downAt is when the first attempt of the outage failed (zero:
	// answering); upAt when the server last answered again; failed the
	// attempts that got no answer during the outage.
	downAt, upAt time.Time
	failed       int64
	err          error // the outage's first failure
	lost         bool  // a request gave up during the outage (Options.OutageClock)
	watchers     map[int]func(replicate.Reach)
	next         int
}

// failedAttempt records that an attempt sent at sent got no answer (err).
func (r *reach) failedAttempt(server string, sent time.Time, err error) {
	r.mu.Lock()
	if !r.downAt.IsZero() {
		r.failed++
		r.mu.Unlock()
		return
	}
	if sent.Before(r.upAt) {
		// sent during the last outage, which has ended since
		r.mu.Unlock()
		return
	}
	r.downAt, r.failed, r.err = time.Now(), 1, err
	r.down.Store(true)
	ev := replicate.Reach{Server: server, Down: true, Err: err, Since: r.downAt, Failed: 1}
	fns := r.fns()
	r.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// downSince is when the current outage began (zero: answering), and
// whether a request already gave up on it (gaveUp).
func (r *reach) downSince() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.downAt, r.lost
}

// gaveUp records that a request gave up during the current outage.
func (r *reach) gaveUp() {
	r.mu.Lock()
	if !r.downAt.IsZero() {
		r.lost = true
	}
	r.mu.Unlock()
}

// answered records that an attempt sent at sent got an answer.
func (r *reach) answered(server string, sent time.Time) {
	r.mu.Lock()
	if r.downAt.IsZero() || sent.Before(r.downAt) {
		// an answer to an attempt sent before the outage was seen
		r.mu.Unlock()
		return
	}
	ev := replicate.Reach{Server: server, Since: r.downAt, Failed: r.failed}
	r.downAt, r.upAt, r.failed, r.err, r.lost = time.Time{}, time.Now(), 0, nil, false
	r.down.Store(false)
	fns := r.fns()
	r.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// fns are the watchers (under mu).
func (r *reach) fns() []func(replicate.Reach) {
	out := make([]func(replicate.Reach), 0, len(r.watchers))
	for _, fn := range r.watchers {
		out = append(out, fn)
	}
	return out
}

// WatchReach calls fn on every edge of the server's reachability from
// now on until stop is called: when it stops answering (an attempt got no
// answer: connection refused or reset, a timeout; the request is retried
// within Options.RetryTime) and when it answers again (an attempt sent
// after that got an answer, whatever its status). One call per edge
// whatever the number of requests failing or retried meanwhile; fn is
// called from the goroutine of the request that saw the edge and must
// not block. A server not answering when WatchReach is called is told at
// once (fn called before WatchReach returns).
func (c *Client) WatchReach(fn func(replicate.Reach)) (stop func()) {
	r := &c.reach
	r.mu.Lock()
	if r.watchers == nil {
		r.watchers = map[int]func(replicate.Reach){}
	}
	id := r.next
	r.next++
	r.watchers[id] = fn
	var now *replicate.Reach
	if !r.downAt.IsZero() {
		now = &replicate.Reach{Server: c.URL(), Down: true, Err: r.err, Since: r.downAt, Failed: r.failed}
	}
	r.mu.Unlock()
	if now != nil {
		fn(*now)
	}
	return func() {
		r.mu.Lock()
		delete(r.watchers, id)
		r.mu.Unlock()
	}
}

// WatchReach is the database's server's (Client.WatchReach): a
// replicate.ReachWatcher.
func (d *DB) WatchReach(fn func(replicate.Reach)) (stop func()) { return d.srv.WatchReach(fn) }
