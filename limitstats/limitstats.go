// Package limitstats holds the account a per-host limiter (the adaptive
// concurrency controller) gives of itself in a run's summary: totals,
// the decisions that changed the limit, and the limit over time.
package limitstats

import "time"

// Reason says why the limit changed: slow_start, increase, overload,
// latency or forget.
type Reason string

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

// Stats is a JSON-ready account of a limiter: totals and decisions.
type Stats struct {
	Host  string `json:"host"`
	Fixed bool   `json:"fixed"`
	// Limit is the limit now; MinLimit and MaxLimit the extremes reached.
	Limit    int `json:"limit"`
	MinLimit int `json:"min_limit"`
	MaxLimit int `json:"max_limit"`
	// Max is the configured cap (--max-requests).
	Max int `json:"max"`
	// Requests counts completed requests (ignored outcomes excluded);
	// Overloads those that signalled overload; Errors other failures.
	Requests  int64 `json:"requests"`
	Overloads int64 `json:"overloads"`
	Errors    int64 `json:"errors"`
	// Decisions holds the first 64 and the last 192 decisions;
	// DecisionsDropped counts the ones in between.
	Decisions        []Decision `json:"decisions"`
	DecisionsDropped int        `json:"decisions_dropped,omitempty"`
	// Timeline is the limit over the limiter's whole life, in at most 128
	// equal intervals (each its time-weighted mean, min and max), oldest
	// first: unlike Decisions it keeps the middle of a long run.
	Timeline []LimitSpan `json:"timeline,omitempty"`
}

// LimitSpan is the limit over one interval of a limiter's life: its
// time-weighted mean and the extremes it took.
type LimitSpan struct {
	Start   time.Time `json:"start"`
	Seconds float64   `json:"seconds"`
	Mean    float64   `json:"mean"`
	Min     int       `json:"min"`
	Max     int       `json:"max"`
}
