package main

import (
	"context"
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/limit"
)

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

// controlFlags configure the adaptive concurrency controller.
type controlFlags struct {
	maxRequests   int
	maxDBs        int
	fixed         bool
	maxRPS        float64
	idealDuration time.Duration
	latencyTol    float64
}

func (f *controlFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.maxRequests, "max-requests", limit.DefaultMax, "most requests in flight per server; the adaptive limit stays below it (0: the default)")
	fs.IntVar(&f.maxDBs, "max-dbs", fleet.DefaultMaxDBs, "most databases copied at once (0: the default)")
	fs.BoolVar(&f.fixed, "fixed", false, "turn the adaptive controller off: always --max-requests per server and --max-dbs databases")
	fs.Float64Var(&f.maxRPS, "max-rps", 0, "hard cap on requests per second per server, for fragile production servers (0: no cap)")
	fs.DurationVar(&f.idealDuration, "ideal-duration", 0, "spread database starts over this time to lower server load (0: no spreading, as fast as the servers allow)")
	fs.Float64Var(&f.latencyTol, "latency-tolerance", limit.DefaultLatencyTolerance, "a server whose median latency rises past its baseline times this factor is taken as overloaded (negative: only 429, 503 and timeouts lower the limit)")
}

// newLimiter is the limiter of one server under these flags.
func (f *controlFlags) newLimiter(host string) *limit.Limiter {
	return limit.New(limit.Options{Name: host, Max: f.maxRequests, Fixed: f.fixed, RPS: f.maxRPS, LatencyTolerance: f.latencyTol})
}

// limiters builds one limiter per host, shared when both URLs name the
// same host.
func (f *controlFlags) limiters(srcURL, tgtURL string) (src, tgt *limit.Limiter) {
	mk := f.newLimiter
	sh, th := hostOf(srcURL), hostOf(tgtURL)
	src = mk(sh)
	if sh == th {
		return src, src
	}
	return src, mk(th)
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	return u.Host
}
