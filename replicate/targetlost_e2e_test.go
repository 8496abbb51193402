package replicate_test

import (
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// A target that stops answering while a continuous run follows (every
// request to it reset, as a stopped server refuses connections) is
// retried by its client, quietly per retry, and the log says so once: a
// line naming the target (its URL without the password) when it is lost,
// and one when it answers again ("target back after ..."), as the feed's
// lines do for the source.
func TestContinuous_TargetLostLines(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	// The target's client is given the admin's credentials in its URL
	// (on CouchDB): its lines must not show them.
	turl := e.px.URL
	var password string
	if u, err := url.Parse(e.srv.URL); err == nil && u.User != nil {
		password, _ = u.User.Password()
		pu, _ := url.Parse(e.px.URL)
		pu.User = u.User
		turl = pu.String()
	}
	tep, err := couch.Probe(t.Context(), turl, faultOpts)
	if err != nil {
		t.Fatal(err)
	}
	tdb := tep.Server.DB(e.tgt)
	loadDocs(t, e.srv, e.src, 50, 50)
	obs := newRecObserver()
	lines := make(chan string, 1000)
	var mu sync.Mutex
	var lost, back []string
	f := follow(t, e.sdb, tdb, replicate.Options{Observer: obs, FlushInterval: 20 * time.Millisecond,
		Log: func(s string) {
			t.Log("sofa: " + s)
			mu.Lock()
			switch {
			case strings.HasPrefix(s, "target lost"):
				lost = append(lost, s)
			case strings.HasPrefix(s, "target back"):
				back = append(back, s)
			}
			mu.Unlock()
			select {
			case lines <- s:
			default:
			}
		}})
	obs.waitCaughtUp(t)
	waitLine := func(prefix string) string {
		t.Helper()
		deadline := time.After(2 * time.Minute)
		for {
			select {
			case s := <-lines:
				if strings.HasPrefix(s, prefix) {
					return s
				}
			case <-f.done:
				t.Fatalf("the run ended: %v", f.err)
			case <-deadline:
				t.Fatalf("no line %q within 2 minutes", prefix)
			}
		}
	}

	// The target stops answering while writes arrive.
	e.rules(t, faultproxy.Rule{Name: "down", Path: path(e.tgt, ""), Fault: faultproxy.Reset})
	localLoad(t, e.srv, e.src, 1000, 30)
	l := waitLine("target lost")
	if !strings.Contains(l, "does not answer") || !strings.Contains(l, strings.TrimPrefix(e.px.URL, "http://")) {
		t.Errorf("line %q: want the target's URL and that it does not answer", l)
	}
	if password != "" && strings.Contains(l, password) {
		t.Errorf("line %q shows the password", l)
	}
	// Several retries of its requests fail before it is back (one line
	// for all of them).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for e.px.Rule("down").Fired < 4 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the target's requests were reset %d times in 2 minutes", e.px.Rule("down").Fired)
		}
	}
	e.rules(t)
	waitLine("target back after")
	waitEqual(t, e.srv, e.src, e.tgt, f)
	f.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || len(back) != 1 {
		t.Errorf("lines %q and %q: want one target lost and one back for %d requests reset", lost, back, e.px.Rule("down").Fired)
	}
}
