package limit

import (
	"context"
	"github.com/sofadb/sofa/limitstats"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Defaults for Options fields left zero.
const (
	DefaultMax              = 64
	DefaultInitial          = 4
	DefaultDecrease         = 0.9
	DefaultLatencyTolerance = 1.5
	DefaultLatencyFloor     = 4
	DefaultMemory           = 2 * time.Minute
	DefaultBaselineWindow   = time.Minute
	DefaultMaxPause         = 30 * time.Second
)

// Options configure a Limiter. The zero value is a usable adaptive limiter
// starting at 4 requests in flight, bounded by 64.
type Options struct {
	// Name identifies the host in logs, decisions and summaries, e.g.
	// "db.example.com:5984". It must not carry credentials.
	Name string
	// Max caps requests in flight (--max-requests). Zero means DefaultMax.
	Max int
	// Min is the floor of the adaptive limit. Zero means 1.
	Min int
	// Initial is the starting limit, clamped to [Min, Max]. Zero means
	// DefaultInitial.
	Initial int
	// Fixed turns the controller off: the limit stays at Max (--fixed).
	Fixed bool
	// RPS caps request starts per second for this host (--max-rps), as a
	// token bucket of burst 1. Zero or negative means no cap.
	RPS float64
	// Decrease is the factor applied to the level that failed. Zero means
	// DefaultDecrease (0.9); it must lie in (0, 1).
	Decrease float64
	// LatencyTolerance: a round whose median latency exceeds the baseline
	// times this factor is an overload. Zero means DefaultLatencyTolerance;
	// negative turns latency signals off (only 429/503/timeouts count).
	LatencyTolerance float64
	// LatencyFloor is the lowest limit latency alone may lead to: a queue
	// of a few requests costs a server nothing, while one or two in flight
	// leave it idle between round trips, and latency on a busy machine
	// rises for reasons other than queueing (CPU contention with the
	// client, a GC pause). 429, 503 and timeouts still lower the limit
	// down to Min. Zero means DefaultLatencyFloor (clamped to [Min, Max]).
	LatencyFloor int
	// Memory is how long the level that last failed is remembered (growth
	// is slow near it). Zero means DefaultMemory.
	Memory time.Duration
	// BaselineWindow is how long a round's median latency may serve as the
	// baseline. Zero means DefaultBaselineWindow.
	BaselineWindow time.Duration
	// MaxPause caps the host-wide pause a Retry-After asks for. Zero means
	// DefaultMaxPause.
	MaxPause time.Duration
	// Logger receives every decision at debug level. Nil means no logs.
	Logger *slog.Logger
}

func (o Options) normalized() Options {
	if o.Max <= 0 {
		o.Max = DefaultMax
	}
	if o.Min <= 0 {
		o.Min = 1
	}
	o.Min = min(o.Min, o.Max)
	if o.Initial <= 0 {
		o.Initial = DefaultInitial
	}
	o.Initial = max(o.Min, min(o.Initial, o.Max))
	if o.Fixed {
		o.Initial = o.Max
	}
	if o.Decrease <= 0 || o.Decrease >= 1 {
		o.Decrease = DefaultDecrease
	}
	if o.LatencyTolerance == 0 {
		o.LatencyTolerance = DefaultLatencyTolerance
	}
	if o.LatencyFloor <= 0 {
		o.LatencyFloor = DefaultLatencyFloor
	}
	o.LatencyFloor = max(o.Min, min(o.LatencyFloor, o.Max))
	if o.Memory <= 0 {
		o.Memory = DefaultMemory
	}
	if o.BaselineWindow <= 0 {
		o.BaselineWindow = DefaultBaselineWindow
	}
	if o.MaxPause <= 0 {
		o.MaxPause = DefaultMaxPause
	}
	return o
}

// Limiter bounds the requests in flight to one host with an adaptive limit.
// It is safe for concurrent use; its methods cost one mutex acquisition
// each. A nil *Limiter admits everything and records nothing.
type Limiter struct {
	opts Options
	rate *rate.Limiter

	mu         sync.Mutex
	inFlight   int
	queue      []*waiter // FIFO; cancelled entries are skipped lazily
	waiting    int       // live entries in queue
	pauseUntil time.Time
	ctl        controller
	log        decisionLog
	timeline   timeline

	// Totals, also read without mu by Stats callers.
	requests  atomic.Int64
	overloads atomic.Int64
	errors    atomic.Int64
	limitNow  atomic.Int64 // integer limit, for lock-free Limit()
	minSeen   int          // under mu
	maxSeen   int          // under mu
}

type waiter struct {
	ch        chan struct{}
	granted   bool
	cancelled bool
	tok       *Token
}

// New returns a limiter for one host.
func New(opts Options) *Limiter {
	o := opts.normalized()
	l := &Limiter{opts: o}
	if o.RPS > 0 {
		l.rate = rate.NewLimiter(rate.Limit(o.RPS), 1)
	}
	l.ctl.init(o)
	l.limitNow.Store(int64(o.Initial))
	l.minSeen, l.maxSeen = o.Initial, o.Initial
	l.timeline.init(time.Now(), o.Initial)
	return l
}

// Token is one admitted request. Call Done exactly once; later calls are
// ignored.
type Token struct {
	l        *Limiter
	start    time.Time
	inFlight int // requests in flight when granted, this one included
	limit    int // limit when granted
	epoch    uint64
	done     atomic.Bool
}

// Acquire waits until a request may start: no host-wide Retry-After pause
// is pending, fewer than Limit() requests are in flight (waiters are served
// first come, first served), and the rate cap allows it. It returns
// ctx.Err() if ctx ends first, and then holds nothing.
func (l *Limiter) Acquire(ctx context.Context) (*Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l == nil {
		return &Token{start: time.Now()}, nil
	}
	if err := l.waitPause(ctx); err != nil {
		return nil, err
	}
	l.mu.Lock()
	var t *Token
	if l.waiting == 0 && l.inFlight < l.ctl.cur() {
		t = l.grantLocked()
		l.mu.Unlock()
	} else {
		w := &waiter{ch: make(chan struct{})}
		l.queue = append(l.queue, w)
		l.waiting++
		l.mu.Unlock()
		select {
		case <-w.ch:
			t = w.tok
		case <-ctx.Done():
			l.mu.Lock()
			if w.granted {
				l.inFlight--
				l.serveLocked()
			} else {
				w.cancelled = true
				l.waiting--
			}
			l.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	if l.rate != nil {
		if err := l.rate.Wait(ctx); err != nil {
			t.Done(Outcome{Ignore: true})
			return nil, err
		}
	}
	t.start = time.Now()
	return t, nil
}

// grantLocked takes a slot and returns its token.
func (l *Limiter) grantLocked() *Token {
	l.inFlight++
	return &Token{l: l, inFlight: l.inFlight, limit: l.ctl.cur(), epoch: l.ctl.epoch}
}

// serveLocked grants slots to waiters while the limit allows.
func (l *Limiter) serveLocked() {
	for l.waiting > 0 && l.inFlight < l.ctl.cur() {
		w := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		if w.cancelled {
			continue
		}
		l.waiting--
		w.granted = true
		w.tok = l.grantLocked()
		close(w.ch)
	}
	if len(l.queue) == 0 {
		l.queue = l.queue[:0:0] // let a large drained backing array go
	}
}

func (l *Limiter) waitPause(ctx context.Context) error {
	l.mu.Lock()
	until := l.pauseUntil
	l.mu.Unlock()
	if until.IsZero() {
		return nil
	}
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done returns the token's slot and feeds the outcome to the controller.
// Calling Done on a nil token, or more than once, does nothing.
func (t *Token) Done(o Outcome) {
	if t == nil || t.l == nil || !t.done.CompareAndSwap(false, true) {
		return
	}
	l := t.l
	now := time.Now()
	if !o.ignored() {
		l.requests.Add(1)
		if o.IsOverload() {
			l.overloads.Add(1)
		} else if o.Err != nil {
			l.errors.Add(1)
		}
	}
	lat := o.Latency
	if lat <= 0 {
		lat = now.Sub(t.start)
	}
	l.mu.Lock()
	l.inFlight--
	if !o.ignored() {
		if o.RetryAfter > 0 {
			if until := now.Add(min(o.RetryAfter, l.opts.MaxPause)); until.After(l.pauseUntil) {
				l.pauseUntil = until
			}
		}
		if !l.opts.Fixed {
			l.ctl.observe(now, t, lat, o)
			for _, d := range l.ctl.out {
				l.recordLocked(d)
			}
			l.ctl.out = l.ctl.out[:0]
		}
	}
	l.serveLocked()
	l.mu.Unlock()
}

// recordLocked logs a decision and publishes the new limit.
func (l *Limiter) recordLocked(d Decision) {
	d.InFlight = l.inFlight
	l.limitNow.Store(int64(d.To))
	l.minSeen = min(l.minSeen, d.To)
	l.maxSeen = max(l.maxSeen, d.To)
	l.log.add(d)
	l.timeline.set(d.Time, d.To)
	if lg := l.opts.Logger; lg != nil && lg.Enabled(context.Background(), slog.LevelDebug) {
		lg.Debug("concurrency limit", "host", l.opts.Name, "reason", string(d.Reason),
			"from", d.From, "to", d.To, "in_flight", d.InFlight, "detail", d.Detail)
	}
}

// Limit returns the current limit on requests in flight.
func (l *Limiter) Limit() int {
	if l == nil {
		return math.MaxInt32
	}
	return int(l.limitNow.Load())
}

// InFlight returns the number of requests holding a token.
func (l *Limiter) InFlight() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight
}

// Waiting returns the number of Acquire calls blocked on the limit.
func (l *Limiter) Waiting() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

// Load returns in-flight and waiting requests and the limit in one
// consistent reading: the demand on this host against its limit.
func (l *Limiter) Load() (inFlight, waiting, limit int) {
	if l == nil {
		return 0, 0, math.MaxInt32
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight, l.waiting, l.ctl.cur()
}

// Name returns Options.Name.
func (l *Limiter) Name() string {
	if l == nil {
		return ""
	}
	return l.opts.Name
}

// Stats is a JSON-ready account of a limiter: totals and decisions.
type Stats = limitstats.Stats

// Stats returns the limiter's totals and decision log. A nil limiter
// returns the zero Stats.
func (l *Limiter) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{
		Host: l.opts.Name, Fixed: l.opts.Fixed,
		Limit: l.ctl.cur(), MinLimit: l.minSeen, MaxLimit: l.maxSeen, Max: l.opts.Max,
		Requests: l.requests.Load(), Overloads: l.overloads.Load(),
		Errors:    l.errors.Load(),
		Decisions: l.log.list(), DecisionsDropped: l.log.dropped,
		Timeline: l.timeline.spans(time.Now()),
	}
}
