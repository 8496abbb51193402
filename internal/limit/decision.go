package limit

import "time"

// Reason says why the limit changed.
type Reason string

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
type Decision struct {
	Time   time.Time `json:"time"`
	Reason Reason    `json:"reason"`
	// From and To are the integer limits before and after.
	From int `json:"from"`
	To   int `json:"to"`
	// InFlight is the number of requests in flight at the decision.
	InFlight int `json:"in_flight"`
	// Detail explains the numbers behind overload and latency decisions,
	// e.g. "status 429 at 21 in flight" or "p50 84ms > 1.5 x 40ms".
	Detail string `json:"detail,omitempty"`
}

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
