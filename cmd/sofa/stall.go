package main

import (
	"fmt"
	"sync"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/limit"
)

// stallWatch tells what a run waits on while its progress stands still:
// per host, the requests retried (client counters) and in flight
// (limiter). Its waiting method is progress.Options.Waiting.
type stallWatch struct {
	mu    sync.Mutex
	hosts []*watchedHost
}

type watchedHost struct {
	lim     *limit.Limiter
	stats   *couch.Counters
	retries int64 // Retries at the last change of progress
}

// add watches one host: its limiter (named after the host) and the
// counters of the client talking to it.
func (w *stallWatch) add(lim *limit.Limiter, stats *couch.Counters) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hosts = append(w.hosts, &watchedHost{lim: lim, stats: stats, retries: stats.Retries.Load()})
}

// waiting says what the run waits on since its last call with stalled
// false (the last change of progress): the requests retried meanwhile and
// those waiting to be retried now, and the host with the most of both
// (or, with none, the one with the most requests in flight), e.g.
// "retrying: 12 requests retried, 3 waiting to retry, waiting on host
// db:5984 (1 in flight)". With stalled false it only starts
// counting afresh and returns "".
func (w *stallWatch) waiting(stalled bool) string {
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
