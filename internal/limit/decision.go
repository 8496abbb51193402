package limit

import "github.com/sofadb/sofa/limitstats"

// Reason says why the limit changed (see package limitstats).
type Reason = limitstats.Reason

const (
	// ReasonSlowStart: a completed request while the limit was nearly used,
	// before any overload (the limit doubles per round trip).
	ReasonSlowStart Reason = "slow_start"
	// ReasonIncrease: additive increase after the first overload.
	ReasonIncrease Reason = "increase"
	// ReasonOverload: a 429, 503, timeout or flagged overload.
	ReasonOverload Reason = "overload"
	// ReasonLatency: a round's median latency rose past the tolerance.
	ReasonLatency Reason = "latency"
	// ReasonForget: the level that last failed was forgotten (no overload
	// for Options.Memory); the limit itself does not change.
	ReasonForget Reason = "forget"
)

// Decision is one entry of a limiter's decision log.
type Decision = limitstats.Decision

// decisionLog keeps the first few and the last many decisions, so a long
// run keeps both how it started and where it ended within bounded memory.
type decisionLog struct {
	head    []Decision // the first headCap decisions
	ring    []Decision // the last ringCap decisions after head is full
	next    int        // next write position in ring once it is full
	dropped int
}

const (
	headCap = 64
	ringCap = 192
)

func (d *decisionLog) add(x Decision) {
	if len(d.head) < headCap {
		d.head = append(d.head, x)
		return
	}
	if len(d.ring) < ringCap {
		d.ring = append(d.ring, x)
		return
	}
	d.ring[d.next] = x
	d.next = (d.next + 1) % ringCap
	d.dropped++
}

// list returns the kept decisions in time order.
func (d *decisionLog) list() []Decision {
	out := make([]Decision, 0, len(d.head)+len(d.ring))
	out = append(out, d.head...)
	out = append(out, d.ring[d.next:]...)
	out = append(out, d.ring[:d.next]...)
	return out
}
