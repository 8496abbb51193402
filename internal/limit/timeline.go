package limit

import (
	"time"

	"github.com/sofadb/sofa/limitstats"
)

// LimitSpan is one interval of a limiter's timeline.
type LimitSpan = limitstats.LimitSpan

// timeline records the limit as a step function in at most timelineCap
// equal intervals: when the life outgrows them, pairs are merged and the
// interval doubles. So a run of any length keeps its whole shape (at a
// resolution of 1/timelineCap to 1/(2*timelineCap) of its length), unlike
// the decision log, which drops its middle.
type timeline struct {
	origin  time.Time
	width   time.Duration
	buckets []span
	last    time.Time // end of what is recorded
	level   int       // limit since last
}

type span struct {
	weighted float64 // sum of limit × seconds
	seconds  float64
	min, max int
}

const (
	timelineCap   = 128
	timelineWidth = 100 * time.Millisecond
)

func (t *timeline) init(now time.Time, level int) {
	*t = timeline{origin: now, width: timelineWidth, last: now, level: level}
}

// set records that the limit became level at now.
func (t *timeline) set(now time.Time, level int) {
	t.advance(now)
	t.level = level
}

// advance extends the current level up to now.
func (t *timeline) advance(now time.Time) {
	for now.After(t.last) {
		i := int(t.last.Sub(t.origin) / t.width)
		if i >= timelineCap {
			t.merge()
			continue
		}
		for len(t.buckets) <= i {
			t.buckets = append(t.buckets, span{})
		}
		end := t.origin.Add(time.Duration(i+1) * t.width)
		if end.After(now) {
			end = now
		}
		b := &t.buckets[i]
		sec := end.Sub(t.last).Seconds()
		if b.seconds == 0 {
			b.min, b.max = t.level, t.level
		}
		b.min, b.max = min(b.min, t.level), max(b.max, t.level)
		b.weighted += float64(t.level) * sec
		b.seconds += sec
		t.last = end
	}
}

// merge halves the resolution: bucket pairs become one bucket.
func (t *timeline) merge() {
	out := t.buckets[:0]
	for i := 0; i < len(t.buckets); i += 2 {
		m := t.buckets[i]
		if i+1 < len(t.buckets) {
			n := t.buckets[i+1]
			switch {
			case m.seconds == 0:
				m = n
			case n.seconds > 0:
				m.min, m.max = min(m.min, n.min), max(m.max, n.max)
				m.weighted += n.weighted
				m.seconds += n.seconds
			}
		}
		out = append(out, m)
	}
	t.buckets = out
	t.width *= 2
}

// spans returns the recorded intervals up to now without changing t.
func (t *timeline) spans(now time.Time) []LimitSpan {
	c := *t
	c.buckets = append([]span(nil), t.buckets...)
	c.advance(now)
	out := make([]LimitSpan, 0, len(c.buckets))
	for i, b := range c.buckets {
		if b.seconds == 0 {
			continue
		}
		out = append(out, LimitSpan{Start: c.origin.Add(time.Duration(i) * c.width), Seconds: b.seconds,
			Mean: b.weighted / b.seconds, Min: b.min, Max: b.max})
	}
	return out
}
