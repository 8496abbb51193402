package sofa_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestSync_TargetLostLines: the target of a whole-server sync stops
// answering (every request reset, as a stopped server refuses
// connections) while writes arrive; its client retries the requests, and
// the run says so once (EventTargetLost, a line naming the target's URL
// without the password) and once when it answers again (EventTargetBack,
// "target back after ..."), however many requests were retried, as the
// watch does for the source's feed.
func TestSync_TargetLostLines(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	dbs := []string{"t1", "t2"}
	for _, db := range dbs {
		seed(t, a, db, 3)
	}
	enableDBUpdates(t, a)
	pt := faultproxy.StartT(t, b.URL)
	// The client has the admin's credentials in the target's URL (on
	// CouchDB): no line may show them.
	turl, password := withCredentials(pt.URL, b.URL)
	var mu sync.Mutex
	var lines []string
	o := sofa.SyncOptions{PollInterval: 200 * time.Millisecond}
	o.Copy.Logf = func(format string, args ...any) {
		l := fmt.Sprintf(format, args...)
		t.Log("sync: " + l)
		if strings.HasPrefix(l, "target ") {
			mu.Lock()
			lines = append(lines, l)
			mu.Unlock()
		}
	}
	r := startSync(t, a.URL, turl, o)
	r.wait("the initial copy", func() bool { return r.caughtUp })

	if err := pt.SetRules(faultproxy.Rule{Name: "down", Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	ca := couchtest.NewClient(a.URL)
	for _, db := range dbs {
		putDocs(t, ca, db, "w", 5)
	}
	r.wait("the target said lost", func() bool { return len(r.targetLines) > 0 })
	// Several of its requests fail and are retried meanwhile.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for pt.Rule("down").Fired < 4 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the target's requests were reset %d times", pt.Rule("down").Fired)
		}
	}
	if err := pt.SetRules(); err != nil {
		t.Fatal(err)
	}
	r.wait("the target said back", func() bool { return len(r.targetLines) > 1 })
	r.waitEqual(a.URL, b.URL, dbs...)
	if _, err := r.stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	r.mu.Lock()
	events := r.targetLines
	r.mu.Unlock()
	if len(events) != 2 || !strings.HasPrefix(events[0], "target lost: ") || !strings.HasPrefix(events[1], "target back after ") {
		t.Fatalf("target events %q: want one lost, then one back (%d requests reset)", events, pt.Rule("down").Fired)
	}
	if !strings.Contains(events[0], strings.TrimPrefix(pt.URL, "http://")) || !strings.Contains(events[0], "does not answer") {
		t.Errorf("%q: want the target's URL and that it does not answer", events[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(lines) != fmt.Sprint(events) {
		t.Errorf("lines %q, want the events' %q", lines, events)
	}
	for _, l := range lines {
		if password != "" && strings.Contains(l, password) {
			t.Errorf("line %q shows the password", l)
		}
	}
}

// TestSync_SourceLostLinesWhilePolling: a source polled (no
// `_db_updates`) that stops answering is said lost at once and back once
// it answers, as the target is; a poll waiting in its retries said
// nothing for up to --retry-time.
func TestSync_SourceLostLinesWhilePolling(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	seed(t, a, "s1", 3)
	ps := faultproxy.StartT(t, a.URL)
	surl, password := withCredentials(ps.URL, a.URL)
	var mu sync.Mutex
	var lines []string
	has := func(prefix string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return true
			}
		}
		return false
	}
	o := sofa.SyncOptions{PollInterval: 100 * time.Millisecond}
	o.Copy.Logf = func(format string, args ...any) {
		l := fmt.Sprintf(format, args...)
		t.Log("sync: " + l)
		if strings.HasPrefix(l, "source ") {
			mu.Lock()
			lines = append(lines, l)
			mu.Unlock()
		}
	}
	r := startSync(t, surl, b.URL, o)
	r.wait("the initial copy", func() bool { return r.caughtUp })
	if r.mode != "poll" {
		t.Skipf("the source is watched by %q, not polled", r.mode)
	}
	if err := ps.SetRules(faultproxy.Rule{Name: "down", Fault: faultproxy.Reset}); err != nil {
		t.Fatal(err)
	}
	// log lines are no events: waited for on a ticker
	waitLine := func(prefix string) {
		t.Helper()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(waitTimeout)
		for !has(prefix) {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("no line %q", prefix)
			}
		}
	}
	waitLine("source lost: ")
	if err := ps.SetRules(); err != nil {
		t.Fatal(err)
	}
	waitLine("source back after ")
	r.stop()
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if password != "" && strings.Contains(l, password) {
			t.Errorf("line %q shows the password", l)
		}
	}
}

// withCredentials is proxy, a fault proxy's URL, with the credentials of
// server, the URL it forwards to, and the password they hold ("" when
// server has none: PouchDB Server).
func withCredentials(proxy, server string) (string, string) {
	u, err := url.Parse(server)
	if err != nil || u.User == nil {
		return proxy, ""
	}
	password, _ := u.User.Password()
	pu, _ := url.Parse(proxy)
	pu.User = u.User
	return pu.String(), password
}
