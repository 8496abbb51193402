package replicate

import (
	"fmt"
	"time"
)

// ReachWatcher is an optional Target ability: telling when its server
// stops answering and when it answers again (couch.DB: its client's,
// whose requests are retried meanwhile). A continuous run logs both
// edges (Options.Log): "target lost: ...; retrying" once per outage, and
// "target back after 6.2s (14 failed attempts)".
type ReachWatcher interface {
	// WatchReach calls fn (which must not block) on every edge from now
	// on until stop is called; a server not answering already is told
	// at once.
	WatchReach(fn func(Reach)) (stop func())
}

// Reach is an edge of a server's reachability.
type Reach struct {
	// Server is the server's URL, without credentials.
	Server string
	// Down: the server stopped answering (an attempt got no answer:
	// connection refused or reset, a timeout), Err the first failure
	// (credentials removed). Otherwise it answers again.
	Down bool
	Err  error
	// Since is when it stopped answering; Failed counts the attempts
	// that got no answer since.
	Since  time.Time
	Failed int64
}

// watchTarget logs the target's reachability edges while a continuous run
// goes on (see ReachWatcher); stop ends it.
func (r *run) watchTarget() (stop func()) {
	w, ok := r.tgt.(ReachWatcher)
	if !ok || r.opts.Log == nil {
		return func() {}
	}
	return w.WatchReach(func(e Reach) { r.logf("%s", e.Line("target")) })
}

// Line says e of the server in role ("target"), as the feed's lines do:
// "target lost: http://host:5984 does not answer (POST /db/_bulk_docs:
// ... connection refused); retrying", "target back after 6.2s (14 failed
// attempts)".
func (e Reach) Line(role string) string {
	if e.Down {
		return fmt.Sprintf("%s lost: %s does not answer (%v); retrying", role, e.Server, e.Err)
	}
	n := "attempts"
	if e.Failed == 1 {
		n = "attempt"
	}
	return fmt.Sprintf("%s back after %s (%d failed %s)", role, time.Since(e.Since).Round(100*time.Millisecond), e.Failed, n)
}
