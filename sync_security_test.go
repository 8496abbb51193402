package sofa_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestSync_SecurityFollowed: a `_security` changed at the source while
// the run follows reaches the target at the next sweep (CouchDB puts it
// in no feed), with no document written; one left alone is not written
// again. Both servers' databases are compared with the test client.
func TestSync_SecurityFollowed(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	for _, db := range []string{"sec-a", "sec-b"} {
		if err := ca.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.PutDoc(ctx, db, "d", map[string]any{"v": 1}); err != nil {
			t.Fatal(err)
		}
		if err := ca.PutSecurity(ctx, db, couchtest.Security{Members: couchtest.Group{Names: []string{"ann"}, Roles: []string{}}}); err != nil {
			t.Fatal(err)
		}
	}
	enableDBUpdates(t, a)
	r := startSync(t, a.URL, b.URL, sofa.SyncOptions{SecurityInterval: 50 * time.Millisecond})
	r.wait("the initial copy", func() bool { return r.caughtUp })

	revoked := couchtest.Security{Members: couchtest.Group{Names: []string{"bob"}, Roles: []string{"ops"}}}
	if err := ca.PutSecurity(ctx, "sec-a", revoked); err != nil {
		t.Fatal(err)
	}
	r.wait("sec-a's _security written", func() bool { return r.security["sec-a"] > 0 })
	var want, got map[string]any
	if err := ca.GetJSON(ctx, "/sec-a/_security", &want); err != nil {
		t.Fatal(err)
	}
	if err := cb.GetJSON(ctx, "/sec-a/_security", &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		w, _ := json.Marshal(want)
		g, _ := json.Marshal(got)
		t.Errorf("target's _security %s, want the source's %s", g, w)
	}
	sum, _ := r.stop()
	if sum == nil || sum.SecurityUpdates != 1 {
		t.Errorf("summary: %+v, want one _security update", sum)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.security["sec-b"] != 0 || r.security["sec-a"] != 1 {
		t.Errorf("_security writes %v, want sec-a once and sec-b never (unchanged)", r.security)
	}
}
