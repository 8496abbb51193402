package sofa_test

import (
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestSync_ReadyBeforeTheFeedsFirstHeartbeat (found by a new user on
// CouchDB 3.5: a whole-server continuous run said nothing and copied
// nothing for about 10 s): CouchDB 3 sends a continuous `_db_updates`
// feed's headers only with its first row or heartbeat, and the initial
// copy waited for them. The feed is now followed from its present
// position, read at once (`feed=normal&since=now`), so the initial copy
// starts whenever the continuous feed answers: here the proxy holds it
// an hour, and the initial copy is done anyway, watching by
// `_db_updates`. (That events after the position reach the target is
// what every other sync test on CouchDB checks.)
func TestSync_ReadyBeforeTheFeedsFirstHeartbeat(t *testing.T) {
	a, b := couchtest.Start(t), couchtest.Start(t)
	if a.Kind != couchtest.CouchDB {
		t.Skip("the feed is CouchDB's _db_updates")
	}
	seed(t, a, "first", 3)
	enableDBUpdates(t, a)
	p := faultproxy.StartT(t, a.URL)
	held := faultproxy.Rule{Name: "held-feed", Method: "GET", Path: `^/_db_updates$`, Query: `(^|&)feed=continuous(&|$)`, Delay: time.Hour}
	if err := p.SetRules(held); err != nil {
		t.Fatal(err)
	}
	r := startSync(t, p.URL, b.URL, sofa.SyncOptions{})
	r.wait("the initial copy", func() bool { return r.caughtUp })
	r.mu.Lock()
	mode := r.mode
	r.mu.Unlock()
	if mode != "db_updates" {
		t.Errorf("watching by %q, want db_updates", mode)
	}
	if p.Rule(held.Name).Matched == 0 {
		t.Error("the continuous feed was never asked for (the case is not tested)")
	}
	r.waitEqual(a.URL, b.URL, "first")
}
