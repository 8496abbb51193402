package sofa

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/limit"
	"github.com/sofadb/sofa/limitstats"
)

// Defaults of LimitOptions.
const (
	DefaultMaxRequests      = limit.DefaultMax
	DefaultLatencyTolerance = limit.DefaultLatencyTolerance
)

// LimitOptions configure a Limiter.
type LimitOptions struct {
	// MaxRequests caps requests in flight to the host; the adaptive
	// limit stays below it. Zero: DefaultMaxRequests.
	MaxRequests int
	// Fixed turns the adaptive controller off: always MaxRequests.
	Fixed bool
	// MaxRPS caps requests started per second (zero: no cap).
	MaxRPS float64
	// LatencyTolerance: a median latency past the baseline times this
	// factor is taken as overload. Zero: DefaultLatencyTolerance;
	// negative: only 429, 503 and timeouts lower the limit.
	LatencyTolerance float64
}

// A Limiter is the adaptive concurrency controller of one host: fewer
// requests in flight on 429, 503, timeouts and rising latency, a pause on
// Retry-After, growth again once the host keeps up.
type Limiter struct{ l *limit.Limiter }

// NewLimiter makes the limiter of the host called name (never with
// credentials).
func NewLimiter(name string, o LimitOptions) *Limiter {
	return &Limiter{limit.New(limit.Options{Name: name, Max: o.MaxRequests, Fixed: o.Fixed, RPS: o.MaxRPS, LatencyTolerance: o.LatencyTolerance})}
}

// Name is the host's name.
func (l *Limiter) Name() string { return l.l.Name() }

// InFlight is the number of requests in flight now.
func (l *Limiter) InFlight() int { return l.l.InFlight() }

// Load returns the requests in flight, those waiting for a slot and the
// current limit (fleet.Limiter).
func (l *Limiter) Load() (inFlight, waiting, limit int) { return l.l.Load() }

// Stats returns the limiter's totals and decisions.
func (l *Limiter) Stats() limitstats.Stats { return l.l.Stats() }

var _ fleet.Limiter = (*Limiter)(nil)

// pacer adapts a per-host limit.Limiter to couch.Pacer.
type pacer struct{ l *limit.Limiter }

func (p pacer) Acquire(ctx context.Context) (func(couch.Outcome), error) {
	tok, err := p.l.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return func(o couch.Outcome) {
		tok.Done(limit.Outcome{Status: o.Status, Err: o.Err, Overload: o.Overload, Latency: o.Latency, RetryAfter: o.RetryAfter})
	}, nil
}

// limiters returns the limiters of endpoints (fleet.Run keeps one of
// each).
func limiters(eps ...*Endpoint) []fleet.Limiter {
	var out []fleet.Limiter
	for _, e := range eps {
		if e.limiter != nil {
			out = append(out, e.limiter)
		}
	}
	return out
}

// A StallWatch tells what a run waits on while its progress stands
// still: per host, the requests retried (client counters) and in flight
// (limiter).
type StallWatch struct {
	mu     sync.Mutex
	hosts  []*watchedHost
	stores []unansweredStore
}

// unansweredStore is a storage.Store that says when its service stops
// answering (package storage/s3's Store).
type unansweredStore interface {
	Unanswered() (time.Duration, bool)
	Service() string
}

type watchedHost struct {
	lim     *limit.Limiter
	stats   *couch.Counters
	retries int64 // Retries at the last change of progress
}

// NewStallWatch watches the http(s) endpoints among eps, and the
// archives among them on a store that says when its service stops
// answering (s3://).
func NewStallWatch(eps ...*Endpoint) *StallWatch {
	w := &StallWatch{}
	for _, e := range eps {
		if e != nil && e.couch != nil && e.limiter != nil {
			s := e.couch.Server.Stats
			w.hosts = append(w.hosts, &watchedHost{lim: e.limiter.l, stats: s, retries: s.Retries.Load()})
		}
		if e != nil && e.couch == nil {
			if u, ok := e.store.(unansweredStore); ok {
				w.stores = append(w.stores, u)
			}
		}
	}
	return w
}

// Waiting says what the run waits on since its last call with stalled
// false (the last change of progress): the requests retried meanwhile and
// those waiting to be retried now, and the host with the most of both
// (or, with none, the one with the most requests in flight), e.g.
// "retrying: 12 requests retried, 3 waiting to retry, waiting on host
// db:5984 (1 in flight)". With stalled false it only starts counting
// afresh and returns "". A nil StallWatch returns "".
func (w *StallWatch) Waiting(stalled bool) string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !stalled {
		for _, h := range w.hosts {
			h.retries = h.stats.Retries.Load()
		}
		return ""
	}
	for _, st := range w.stores {
		if d, ok := st.Unanswered(); ok {
			return fmt.Sprintf("retrying: %s has answered no request for %s", st.Service(), d.Round(time.Second))
		}
	}
	var total, backoff int64
	var busiest *watchedHost
	var busiestScore int64
	for _, h := range w.hosts {
		d := h.stats.Retries.Load() - h.retries
		b := h.stats.Backoff.Load()
		total += d
		backoff += b
		score := d + b
		if busiest == nil || score > busiestScore || (score == busiestScore && h.lim.InFlight() > busiest.lim.InFlight()) {
			busiest, busiestScore = h, score
		}
	}
	switch {
	case busiest == nil:
		return ""
	case total > 0 || backoff > 0:
		return fmt.Sprintf("retrying: %d %s retried, %d waiting to retry, waiting on host %s (%d in flight)",
			total, plural(total, "request"), backoff, busiest.lim.Name(), busiest.lim.InFlight())
	case busiest.lim.InFlight() > 0:
		return fmt.Sprintf("no request retried, waiting on host %s (%d in flight)", busiest.lim.Name(), busiest.lim.InFlight())
	}
	return "no request retried or in flight"
}

func plural(n int64, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}
