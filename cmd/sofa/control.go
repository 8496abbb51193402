package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/sofadb/sofa"
)

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
	fs.IntVar(&f.maxRequests, "max-requests", sofa.DefaultMaxRequests, "most requests in flight per server; the adaptive limit stays below it (0: the default)")
	fs.IntVar(&f.maxDBs, "max-dbs", sofa.DefaultMaxDBs, "most databases copied at once (0: the default)")
	fs.BoolVar(&f.fixed, "fixed", false, "turn the adaptive controller off: always --max-requests per server and --max-dbs databases")
	fs.Float64Var(&f.maxRPS, "max-rps", 0, "hard cap on requests per second per server, for fragile production servers (0: no cap)")
	fs.DurationVar(&f.idealDuration, "ideal-duration", 0, "spread database starts over this time to lower server load (0: no spreading, as fast as the servers allow)")
	fs.Float64Var(&f.latencyTol, "latency-tolerance", sofa.DefaultLatencyTolerance, "a server whose median latency rises past its baseline times this factor is taken as overloaded (negative: only 429, 503 and timeouts lower the limit)")
}

// newLimiter is the limiter of one server under these flags.
func (f *controlFlags) newLimiter(host string) *sofa.Limiter {
	return sofa.NewLimiter(host, sofa.LimitOptions{MaxRequests: f.maxRequests, Fixed: f.fixed, MaxRPS: f.maxRPS, LatencyTolerance: f.latencyTol})
}

// limiters builds one limiter per host, shared when both URLs name the
// same host.
func (f *controlFlags) limiters(srcURL, tgtURL string) (src, tgt *sofa.Limiter) {
	mk := f.newLimiter
	sh, th := hostOf(srcURL), hostOf(tgtURL)
	src = mk(sh)
	if sh == th {
		return src, src
	}
	return src, mk(th)
}

func hostOf(raw string) string { return sofa.HostOf(raw) }

// runControl is the library's run control under these flags: prog
// receives the progress (nil: none), out the log lines.
func (f *controlFlags) runControl(out *outputFlags, prog sofa.Progress) sofa.RunControl {
	return sofa.RunControl{MaxDBs: f.maxDBs, Fixed: f.fixed, IdealDuration: f.idealDuration,
		Progress: prog, Logger: out.logger(), Logf: out.logf, DebugLogf: out.debugLogf()}
}
