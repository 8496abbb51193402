package sofa_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCopyDB_RerunWritesNoMetadata: a rerun of a copy whose target
// already holds the source's `_security` and `_revs_limit` reads them and
// writes neither (a whole-server rerun that copied nothing wrote both
// into each of 3,022 databases, growing their files and update_seqs);
// a `_security` changed at the source since is written.
func TestCopyDB_RerunWritesNoMetadata(t *testing.T) {
	ctx := context.Background()
	srv := couchtest.Start(t)
	if srv.Kind != couchtest.CouchDB {
		t.Skip("PouchDB Server keeps no _revs_limit and no _security")
	}
	seed(t, srv, "src", 3)
	c := couchtest.NewClient(srv.URL)
	sec := map[string]any{"admins": map[string]any{"names": []string{"ann"}, "roles": []string{}}, "members": map[string]any{"names": []string{}, "roles": []string{"staff"}}}
	if err := c.PutSecurity(ctx, "src", sec); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "PUT", "/src/_revs_limit", 77, nil); err != nil {
		t.Fatal(err)
	}
	copyOnce := func() map[string]int64 {
		t.Helper()
		src, err := sofa.Open(ctx, srv.URL+"/src", sofa.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dst, err := sofa.Open(ctx, srv.URL+"/dst", sofa.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sofa.CopyDB(ctx, src, dst, sofa.CopyDBOptions{CreateTarget: true, CopySecurity: true}); err != nil {
			t.Fatal(err)
		}
		return dst.Couch().Server.Stats.Kinds()
	}
	updateSeq := func() string {
		var info struct {
			UpdateSeq any `json:"update_seq"`
		}
		if _, err := c.Do(ctx, "GET", "/dst", nil, &info); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(info.UpdateSeq)
	}
	copyOnce()
	seq := updateSeq()
	kinds := copyOnce()
	if n := kinds["PUT /db/_security"] + kinds["PUT /db/_revs_limit"]; n != 0 {
		t.Errorf("the rerun wrote metadata equal to the target's: %v", kinds)
	}
	if got := updateSeq(); got != seq {
		t.Errorf("the rerun moved the target's update_seq from %s to %s", seq, got)
	}
	var got map[string]any
	if _, err := c.Do(ctx, "GET", "/dst/_security", nil, &got); err != nil || fmt.Sprint(got) != fmt.Sprint(map[string]any{"admins": map[string]any{"names": []any{"ann"}, "roles": []any{}}, "members": map[string]any{"names": []any{}, "roles": []any{"staff"}}}) {
		t.Errorf("target _security %v (%v)", got, err)
	}
	sec["admins"] = map[string]any{"names": []string{"bob"}, "roles": []string{}}
	if err := c.PutSecurity(ctx, "src", sec); err != nil {
		t.Fatal(err)
	}
	if kinds := copyOnce(); kinds["PUT /db/_security"] != 1 {
		t.Errorf("a _security changed at the source was not written: %v", kinds)
	}
}
