package limit

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// minRound is the fewest samples a latency round holds, so that its median
// means something at small limits.
const minRound = 16

// maxStrikes bounds how much slower probing near a known ceiling gets:
// growth there is 1/(4·strikes) of the normal additive increase.
const maxStrikes = 8

// controller is the adaptive part of a Limiter. It is not safe for
// concurrent use: the Limiter calls it under its mutex.
type controller struct {
	o         Options
	limit     float64 // fractional; the effective limit is its floor
	slowStart bool
	epoch     uint64 // bumped on every decrease

	// ceiling is the level that last failed; 0 when none is remembered.
	ceiling   float64
	ceilingAt time.Time
	// strikes counts overloads in a row near the same ceiling (at most
	// maxStrikes): probing near a level that keeps failing gets rarer.
	strikes int

	// hold stops additive increase while the last round's median latency
	// was mildly above the baseline (queueing has begun).
	hold bool
	// slowRounds counts consecutive rounds over the latency tolerance; it
	// takes two to decrease, so one slow moment (a GC pause, a compaction)
	// does not halve the throughput.
	slowRounds int

	// The current latency round.
	roundLats     []time.Duration
	roundInFlight int // sum of in-flight counts at grant
	roundTarget   int

	out []Decision // decisions of the last observe, drained by the Limiter

	baseline windowMin
}

func (c *controller) init(o Options) {
	c.o = o
	c.limit = float64(o.Initial)
	c.slowStart = true
	c.baseline.window = o.BaselineWindow
	c.resetRound()
}

// cur is the effective integer limit.
func (c *controller) cur() int {
	return max(c.o.Min, min(c.o.Max, int(c.limit)))
}

func (c *controller) resetRound() {
	c.roundLats = c.roundLats[:0]
	c.roundInFlight = 0
	c.roundTarget = max(c.cur(), minRound)
}

// holdTolerance is the latency ratio above which growth pauses: a quarter
// of the way from no queueing to the overload tolerance.
func (c *controller) holdTolerance() float64 {
	return 1 + (c.o.LatencyTolerance-1)/4
}

// observe feeds one outcome and appends the decisions it caused to c.out.
func (c *controller) observe(now time.Time, t *Token, lat time.Duration, o Outcome) {
	if c.ceiling > 0 && now.Sub(c.ceilingAt) > c.o.Memory {
		c.ceiling = 0
		c.strikes = 0
		c.emit(now, c.cur(), ReasonForget, fmt.Sprintf("no overload for %s", c.o.Memory))
	}
	if o.IsOverload() {
		if t.epoch != c.epoch {
			return // this round trip was already answered
		}
		what := "overload"
		switch {
		case o.Status != 0:
			what = fmt.Sprintf("status %d", o.Status)
		case o.Err != nil:
			what = "timeout"
		}
		level := float64(t.inFlight)
		// One rejection at most halves the limit: a request refused while
		// few of ours were in flight says the server's capacity is taken
		// by requests the limiter does not count (another client, changes
		// feeds whose slot was given back at their headers, a CouchDB's
		// open databases), not that it takes only that few. Going by the
		// level alone dropped the limit to 1 on CouchDB behind a proxy cap
		// of 12, and then it grew back by one per round trip.
		est := max(level, float64(c.cur())/2)
		c.decrease(now, level, est, ReasonOverload, fmt.Sprintf("%s at %d in flight", what, t.inFlight))
		return
	}
	if o.Err != nil || o.Status >= 500 {
		return // a failure, but not a load signal
	}
	from := c.cur()
	grew := c.grow(t)
	if grew && c.cur() != from {
		r := ReasonIncrease
		if c.slowStart {
			r = ReasonSlowStart
		}
		c.emit(now, from, r, "")
	}
	if t.epoch == c.epoch {
		c.addSample(now, t, lat)
	}
}

// emit records a decision whose limit before was from.
func (c *controller) emit(now time.Time, from int, r Reason, detail string) {
	c.out = append(c.out, Decision{Time: now, Reason: r, From: from, To: c.cur(), Detail: detail})
}

// grow applies slow start or additive increase for one success. It only
// grows a limit that was nearly used when the request started: an idle
// limit says nothing about what the server can take.
func (c *controller) grow(t *Token) bool {
	if t.inFlight*4 < t.limit*3 || c.cur() >= c.o.Max {
		return false
	}
	if c.slowStart {
		c.limit++
		return true
	}
	if c.hold {
		return false
	}
	step := 1 / c.limit
	if c.ceiling > 0 && c.limit >= 0.9*c.ceiling {
		if c.limit >= 2*c.ceiling {
			c.ceiling, c.strikes = 0, 0 // far past the old failure without trouble
		} else {
			step /= float64(4 * max(c.strikes, 1))
		}
	}
	c.limit = min(float64(c.o.Max), c.limit+step)
	return true
}

// addSample adds a success to the latency round and, when the round is
// full, judges it.
func (c *controller) addSample(now time.Time, t *Token, lat time.Duration) {
	if c.o.LatencyTolerance < 0 {
		return
	}
	c.roundLats = append(c.roundLats, lat)
	c.roundInFlight += t.inFlight
	if len(c.roundLats) < c.roundTarget {
		return
	}
	slices.Sort(c.roundLats)
	p50 := c.roundLats[len(c.roundLats)/2]
	avg := float64(c.roundInFlight) / float64(len(c.roundLats))
	c.baseline.add(now, p50)
	base := c.baseline.min(now)
	c.resetRound()
	if base <= 0 {
		return
	}
	ratio := float64(p50) / float64(base)
	c.hold = ratio > c.holdTolerance()
	if ratio <= c.o.LatencyTolerance || c.cur() <= c.o.LatencyFloor {
		c.slowRounds = 0
		return
	}
	if c.slowRounds++; c.slowRounds < 2 {
		return
	}
	c.slowRounds = 0
	// Little's law: with latency inflated by queueing, the server really
	// serves avg × base / p50 requests at once.
	// One latency decision at most halves the limit: a single-threaded
	// server (PouchDB) queues every request, so its latency grows with any
	// load and the estimate alone would collapse the limit to 1.
	est := max(avg/ratio, float64(c.cur())/2, float64(c.o.LatencyFloor)/c.o.Decrease+1e-9) // floor: see Options.LatencyFloor
	c.decrease(now, 0, est, ReasonLatency,
		fmt.Sprintf("p50 %s > %.2g x baseline %s at %.1f in flight", p50, c.o.LatencyTolerance, base, avg))
}

// decrease sets the limit to Decrease × estimate (never above the current
// limit) and starts a new epoch. A positive level (the in-flight count a
// request was rejected at) is remembered as the ceiling near which growth
// slows; latency decisions pass 0 and leave the ceiling alone, since
// queueing is not rejection.
func (c *controller) decrease(now time.Time, level, estimate float64, r Reason, detail string) {
	from := c.cur()
	c.limit = math.Max(float64(c.o.Min), math.Min(c.limit, c.o.Decrease*estimate))
	c.slowStart = false
	c.hold = false
	c.slowRounds = 0
	c.epoch++
	c.resetRound()
	defer c.emit(now, from, r, detail)
	if level <= 0 {
		return
	}
	if c.ceiling > 0 && math.Abs(level-c.ceiling) <= max(0.1*c.ceiling, 1) {
		c.strikes = min(c.strikes+1, maxStrikes)
	} else {
		c.strikes = 1
	}
	c.ceiling = level
	c.ceilingAt = now
}

// windowMin is the minimum of values added over the last window, kept in
// eight buckets so that old minima expire.
type windowMin struct {
	window  time.Duration
	buckets [8]struct {
		start time.Time
		min   time.Duration
	}
}

func (w *windowMin) width() time.Duration { return max(w.window/8, time.Nanosecond) }

func (w *windowMin) add(now time.Time, v time.Duration) {
	start := now.Truncate(w.width())
	i := int(start.UnixNano()/int64(w.width())) & 7
	b := &w.buckets[i]
	if !b.start.Equal(start) {
		b.start, b.min = start, v
		return
	}
	b.min = min(b.min, v)
}

func (w *windowMin) min(now time.Time) time.Duration {
	var m time.Duration
	for _, b := range w.buckets {
		if b.start.IsZero() || now.Sub(b.start) >= w.window {
			continue
		}
		if m == 0 || b.min < m {
			m = b.min
		}
	}
	return m
}
