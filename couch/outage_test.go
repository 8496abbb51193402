package couch

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// TestOutageClock: with Options.OutageClock a request that starts after
// the server has not answered for RetryTime gives up at its first failed
// attempt (a one-shot run's checkpoints after its writes gave up waited
// RetryTime again each: a lost target took 2.3x --retry-time to be given
// up); without it, each request has RetryTime of its own. Attempts are
// counted (Stats.Retries), not timed.
func TestOutageClock(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: every attempt is refused, no answer
	for _, clock := range []bool{true, false} {
		c, err := NewClient(url, Options{RetryTime: 600 * time.Millisecond, OutageClock: clock})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if _, err := c.do(ctx, &request{Method: "GET", Path: "/"}); !errors.Is(err, replicate.ErrUnreachable) {
			t.Fatalf("first request: %v, want ErrUnreachable", err)
		}
		if c.Stats.Retries.Load() == 0 {
			t.Fatal("the first request was not retried")
		}
		before := c.Stats.Retries.Load()
		_, err = c.do(ctx, &request{Method: "GET", Path: "/_all_dbs"})
		if !errors.Is(err, replicate.ErrUnreachable) {
			t.Fatalf("second request: %v, want ErrUnreachable", err)
		}
		retried := c.Stats.Retries.Load() - before
		if clock && retried != 0 {
			t.Errorf("OutageClock: the request after the server was found lost was retried %d times, want none", retried)
		}
		// its error says how long the server has not answered, not only
		// its own one attempt
		if clock && !strings.Contains(err.Error(), "the server has not answered for ") {
			t.Errorf("OutageClock: second request's error %q does not say how long the outage lasted", err)
		}
		if !clock && retried == 0 {
			t.Errorf("without OutageClock: the second request was not retried")
		}
	}
}

// TestRetryTimeSpent: a request to a server that does not answer is
// retried until RetryTime is spent, its last wait cut to what is left,
// not given up a whole backoff early (a 20 s --retry-time ended 12.7 s
// in). Only the lower bound is timed: a loaded machine is only slower.
func TestRetryTimeSpent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: every attempt is refused at once
	// backoffs from 250 ms doubling: 0.25+0.5+1 = 1.75 s, and the next
	// (2 s) would pass 2.5 s; the retries must reach 2.5 s
	const budget = 2500 * time.Millisecond
	c, err := NewClient(url, Options{RetryTime: budget})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.do(t.Context(), &request{Method: "GET", Path: "/"})
	if !errors.Is(err, replicate.ErrUnreachable) {
		t.Fatalf("%v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d < budget {
		t.Errorf("gave up after %s, before the retry time of %s was spent: %v", d, budget, err)
	}
}
