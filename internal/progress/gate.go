package progress

import "time"

// Gate holds back periodic progress lines that would only repeat the
// previous one: a line is printed when what it reports (its key: the
// counters, not the elapsed time or the rates) changed, or, while nothing
// changes, once every Quiet as a "still waiting" line. Without it a run
// whose requests are being retried prints the same line on every tick.
//
// A Gate is not safe for concurrent use; the zero value prints a waiting
// line on every tick of a stall.
type Gate struct {
	// Quiet is the time between "still waiting" lines while the key stays
	// the same.
	Quiet time.Duration

	started   bool
	last      string
	printedAt time.Time // last line printed
	changedAt time.Time // key last changed
}

// Check is called on every tick with the line's key. print says whether to
// print a line now; stalled, when > 0, says that nothing changed for that
// long and the line is a "still waiting" one.
func (g *Gate) Check(key string, now time.Time) (print bool, stalled time.Duration) {
	if !g.started || key != g.last {
		g.started, g.last, g.printedAt, g.changedAt = true, key, now, now
		return true, 0
	}
	if now.Sub(g.printedAt) >= g.Quiet {
		g.printedAt = now
		return true, max(now.Sub(g.changedAt), time.Nanosecond)
	}
	return false, 0
}

// DefaultQuiet is the time between "still waiting" lines for a display
// ticking every interval: six ticks (a minute for the 10 s log lines).
func DefaultQuiet(interval time.Duration) time.Duration { return 6 * interval }
