package sofa_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
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

// TestSync_SecurityOfDeletedSourceKept: a database deleted at the source
// keeps its `_security` on the target. The deletion is not noticed here
// (the source is polled once an hour), so every sweep after it reads the
// deleted database's `_security` (404): that read must not be taken for
// an empty `_security` and written, which would open the copy to every
// user. The test waits until the source proxy has answered a sweep's read
// with 404.
func TestSync_SecurityOfDeletedSourceKept(t *testing.T) {
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	if err := ca.CreateDB(ctx, "priv"); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.PutDoc(ctx, "priv", "secret", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	sec := couchtest.Security{Admins: couchtest.Group{Names: []string{"boss"}, Roles: []string{}},
		Members: couchtest.Group{Names: []string{"alice"}, Roles: []string{}}}
	if err := ca.PutSecurity(ctx, "priv", sec); err != nil {
		t.Fatal(err)
	}
	px := recproxy.Start(t, a.AdminURL())
	r := startSync(t, px.UserURL(a.AdminUser, a.AdminPassword), b.URL,
		sofa.SyncOptions{PollInterval: time.Hour, SecurityInterval: 20 * time.Millisecond})
	r.wait("the initial copy", func() bool { return r.caughtUp })
	var want map[string]any
	if err := cb.GetJSON(ctx, "/priv/_security", &want); err != nil {
		t.Fatal(err)
	}
	if err := ca.DeleteDB(ctx, "priv"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for !readGone(px.Recorded(), "/priv/_security") {
		if time.Now().After(deadline) {
			t.Fatalf("no sweep read priv's _security after its deletion in %s", waitTimeout)
		}
		time.Sleep(10 * time.Millisecond) // polling the proxy's record: the event is its 404
	}
	// One more sweep read after the first 404, so that a write the first
	// one caused has been sent and answered.
	n := len(px.Filter("GET", "/priv/_security"))
	for len(px.Filter("GET", "/priv/_security")) <= n {
		if time.Now().After(deadline) {
			t.Fatalf("no second sweep after priv's deletion in %s", waitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var got map[string]any
	if err := cb.GetJSON(ctx, "/priv/_security", &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("target's _security after the source's deletion: %v, want %v", got, want)
	}
	r.mu.Lock()
	writes := r.security["priv"]
	r.mu.Unlock()
	if writes != 0 {
		t.Errorf("_security written to the target %d times after the source's deletion", writes)
	}
}

// readGone says whether one of ex is a GET of a path ending in suffix
// answered 404.
func readGone(ex []recproxy.Exchange, suffix string) bool {
	for _, e := range ex {
		if e.Method == "GET" && strings.HasSuffix(e.Path, suffix) && e.Status == 404 {
			return true
		}
	}
	return false
}

// TestSync_RevsLimitFollowed: a `_revs_limit` raised at the source while
// the run follows reaches the target at the next sweep (CouchDB puts it
// in no feed either), so edits after it keep their history there; one
// left alone is not written again. PouchDB Server has no `_revs_limit`.
func TestSync_RevsLimitFollowed(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "PouchDB Server has no _revs_limit")
	ctx := context.Background()
	a, b := couchtest.Start(t), couchtest.Start(t)
	ca, cb := couchtest.NewClient(a.URL), couchtest.NewClient(b.URL)
	for _, db := range []string{"lim-a", "lim-b"} {
		if err := ca.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if err := ca.PutJSON(ctx, "/"+db+"/_revs_limit", 5, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.PutDoc(ctx, db, "d", map[string]any{"v": 0}); err != nil {
			t.Fatal(err)
		}
	}
	enableDBUpdates(t, a)
	r := startSync(t, a.URL, b.URL, sofa.SyncOptions{SecurityInterval: 50 * time.Millisecond})
	r.wait("the initial copy", func() bool { return r.caughtUp })
	if err := ca.PutJSON(ctx, "/lim-a/_revs_limit", 1000, nil); err != nil {
		t.Fatal(err)
	}
	r.wait("lim-a's _revs_limit written", func() bool { return r.revsLim["lim-a"] > 0 })
	var got int
	if err := cb.GetJSON(ctx, "/lim-a/_revs_limit", &got); err != nil {
		t.Fatal(err)
	}
	if got != 1000 {
		t.Errorf("target's _revs_limit %d, want the source's 1000", got)
	}
	sum, _ := r.stop()
	if sum == nil || sum.RevsLimitUpdates != 1 {
		t.Errorf("summary: %+v, want one _revs_limit update", sum)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revsLim["lim-b"] != 0 || r.revsLim["lim-a"] != 1 {
		t.Errorf("_revs_limit writes %v, want lim-a once and lim-b never (unchanged)", r.revsLim)
	}
}
