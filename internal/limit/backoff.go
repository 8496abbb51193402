package limit

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryAfter parses the Retry-After header of h: either delay-seconds
// ("120") or an HTTP-date, which is taken relative to now. ok is false when
// the header is absent or unparsable. A date in the past gives 0, true.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		const maxSecs = int64(1<<63-1) / int64(time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// Default backoff bounds for zero Backoff fields.
const (
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
)

// Backoff is a full-jitter exponential retry schedule: the delay before
// retry n (counting from 0) is uniform in [0, min(Max, Base·2ⁿ)]. The zero
// value uses DefaultBackoffBase and DefaultBackoffMax with no total budget.
// A Backoff holds no state and is safe for concurrent use.
type Backoff struct {
	// Base is the ceiling of the first delay. Zero means DefaultBackoffBase.
	Base time.Duration
	// Max caps every delay ceiling. Zero means DefaultBackoffMax.
	Max time.Duration
	// Total bounds the time spent retrying, measured by the caller from the
	// first attempt. Zero means no bound.
	Total time.Duration
}

// Next returns the jittered delay before retry attempt (0 for the first
// retry). Negative attempts count as 0.
func (b *Backoff) Next(attempt int) time.Duration {
	c := b.ceiling(attempt)
	if c <= 0 {
		return 0
	}
	return rand.N(c + 1)
}

// ceiling is min(Max, Base·2^attempt) without overflow.
func (b *Backoff) ceiling(attempt int) time.Duration {
	base, hi := b.Base, b.Max
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if hi <= 0 {
		hi = DefaultBackoffMax
	}
	attempt = max(attempt, 0)
	if attempt >= 62 || base > hi>>attempt {
		return hi
	}
	return min(hi, base<<attempt)
}

// Delay combines Next with the server's hint (a Retry-After delay; 0 for
// none) and the Total budget: it returns max(Next(attempt), hint), cut to
// what is left of Total after elapsed. ok is false when the budget is
// spent: stop retrying.
func (b *Backoff) Delay(attempt int, elapsed, hint time.Duration) (d time.Duration, ok bool) {
	d = max(b.Next(attempt), hint)
	if b.Total <= 0 {
		return d, true
	}
	left := b.Total - elapsed
	if left <= 0 {
		return 0, false
	}
	return min(d, left), true
}

// Sleep waits for d or until ctx ends, returning ctx.Err() in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
