package sofa_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// TestSync_ContinuousWatchDeniedStops: the source's watch refused for lack of
// rights (CouchDB's 401 for a password changed meanwhile) stops the run
// with that error (replicate.ErrDenied) rather than reconnect to the
// `_db_updates` feed, or poll again, with a backoff: every try would be
// one more failed login, and CouchDB locks an account after a few. A
// reconnect or poll logged after the refusal fails the test at once.
func TestSync_ContinuousWatchDeniedStops(t *testing.T) {
	refused := faultproxy.Rule{Method: "GET", Fault: faultproxy.Status, Status: 401,
		Body: `{"error":"unauthorized","reason":"Name or password is incorrect."}`}
	t.Run("db_updates", func(t *testing.T) {
		a, b := couchtest.Start(t), couchtest.Start(t)
		if a.Kind != couchtest.CouchDB {
			t.Skip("the feed is CouchDB's _db_updates")
		}
		seed(t, a, "w1", 3)
		enableDBUpdates(t, a)
		p := faultproxy.StartT(t, a.URL)
		// The feed's position (feed=normal) is read; the continuous feed
		// is refused.
		feed := refused
		feed.Name, feed.Path, feed.Query = "feed", `^/_db_updates$`, `(^|&)feed=continuous(&|$)`
		if err := p.SetRules(feed); err != nil {
			t.Fatal(err)
		}
		retried := make(chan string, 100)
		o := sofa.SyncOptions{}
		o.Copy.Logf = watchLines(t, retried, "reconnecting in")
		r := startSync(t, p.URL, b.URL, o)
		waitDenied(t, r, retried)
		if n := p.Rule("feed").Fired; n != 1 {
			t.Errorf("the refused feed was asked for %d times, want once", n)
		}
	})
	t.Run("poll", func(t *testing.T) {
		a, b := couchtest.Start(t), couchtest.Start(t)
		seed(t, a, "w1", 3)
		p := faultproxy.StartT(t, a.URL)
		retried := make(chan string, 100)
		o := sofa.SyncOptions{Poll: true, PollInterval: 20 * time.Millisecond}
		o.Copy.Logf = watchLines(t, retried, "source: poll lost:", "source: list databases:")
		r := startSync(t, p.URL, b.URL, o)
		r.wait("a poll after the initial copy", func() bool { return r.caughtUp && r.polls > 0 })
		list := refused
		list.Name, list.Path = "list", `^/_all_dbs$`
		if err := p.SetRules(list); err != nil {
			t.Fatal(err)
		}
		waitDenied(t, r, retried)
		if n := p.Rule("list").Fired; n != 1 {
			t.Errorf("the refused listing was asked for %d times, want once", n)
		}
	})
}

// watchLines logs a run's lines, and sends to retried those holding
// one of marks.
func watchLines(t *testing.T, retried chan<- string, marks ...string) func(string, ...any) {
	return func(format string, args ...any) {
		l := fmt.Sprintf(format, args...)
		t.Logf("sync: %s", l)
		for _, m := range marks {
			if strings.Contains(l, m) {
				select {
				case retried <- l:
				default:
				}
			}
		}
	}
}

// waitDenied waits for r to end on the refusal, failing at once when a
// line says it is tried again.
func waitDenied(t *testing.T, r *syncRun, retried <-chan string) {
	t.Helper()
	select {
	case <-r.done:
	case l := <-retried:
		t.Fatalf("the refusal was retried: %s", l)
	case <-time.After(waitTimeout):
		t.Fatalf("the run still goes on %s after the refusal", waitTimeout)
	}
	if !errors.Is(r.err, replicate.ErrDenied) || !strings.Contains(r.err.Error(), "HTTP 401") {
		t.Errorf("Sync: %v, want the refusal (replicate.ErrDenied, HTTP 401)", r.err)
	}
	if r.sum == nil || r.sum.Interrupted {
		t.Errorf("summary %+v, want one not marked interrupted", r.sum)
	}
}
