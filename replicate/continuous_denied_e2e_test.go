package replicate_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// A one-database continuous run whose source refuses the reopened feed
// for lack of rights (HTTP 401: the account's password changed while the
// feed was open) stops with that error, matching replicate.ErrDenied,
// rather than reconnecting with backoff: every reconnect would be one
// more failed login, and CouchDB locks an account after a few.
func TestContinuous_FeedDeniedStops(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs(t, e.srv, e.src, 10, 10)
	runOK(t, e.sdb, e.tdb, replicate.Options{}) // the follow's catch-up is then one feed request
	// The catch-up's feed passes; the continuous feed is cut after its
	// first row, and every feed after that is refused.
	e.rules(t,
		faultproxy.Rule{Name: "cut", Path: path(e.src, "/_changes$"), Fault: faultproxy.CutChanges, CutRows: 1, After: 1, Times: 1},
		faultproxy.Rule{Name: "401", Path: path(e.src, "/_changes$"), Fault: faultproxy.Status, Status: 401, After: 1},
	)
	f := follow(t, e.sdb, e.tdb, replicate.Options{})
	// Changes to follow, until the run stops (the cut needs a row).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for i := 0; ; i++ {
		select {
		case <-f.done:
		case <-deadline:
			t.Fatalf("the run did not stop on the refused feed: %+v", e.px.Stats().Rules)
		case <-tick.C:
			if _, err := e.srv.Client().PutDoc(t.Context(), e.src, fmt.Sprintf("more%d", i), map[string]any{"v": i}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		break
	}
	if !errors.Is(f.err, replicate.ErrDenied) {
		t.Fatalf("run ended with %v, want an error matching ErrDenied", f.err)
	}
	if n := e.px.Rule("401").Fired; n != 1 {
		t.Errorf("the refused feed was asked %d times, want once (no reconnect after a 401)", n)
	}
}
