package sofa_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCopy_StemmedHistoryOtherWinnerWarned: a document edited past the
// source's _revs_limit and then deleted is copied as a new branch (its
// history no longer reaches the revision the target holds, as with
// CouchDB's replicator): the target keeps the old revision live. A copy
// with VerifyFull said "ok"; it now warns that the document is deleted at
// the source and live on the target.
func TestCopy_StemmedHistoryOtherWinnerWarned(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "_revs_limit is CouchDB's")
	ctx := t.Context()
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	c := src.Client()
	if err := c.CreateDB(ctx, "stem"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "PUT", "/stem/_revs_limit", strings.NewReader("5"), nil); err != nil {
		t.Fatal(err)
	}
	rev, err := c.PutDoc(ctx, "stem", "d", map[string]any{"e": 0})
	if err != nil {
		t.Fatal(err)
	}
	s, d := openAt(t, src.URL, nil), openAt(t, tgt.URL, nil)
	o := sofa.CopyOptions{Verify: sofa.VerifyFull, Selection: sofa.Selection{Include: []string{"stem"}}}
	if sum, err := sofa.Copy(ctx, s, d, o); err != nil || !sum.Complete() {
		t.Fatalf("first copy: %+v, %v", sum, err)
	}
	for i := 1; i <= 8; i++ {
		if rev, err = c.PutDoc(ctx, "stem", "d", map[string]any{"_rev": rev, "e": i}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Do(ctx, "DELETE", fmt.Sprintf("/stem/d?rev=%s", rev), nil, nil); err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Copy(ctx, s, d, o)
	if err != nil || !sum.Complete() || len(sum.DBs) != 1 {
		t.Fatalf("second copy: %+v, %v", sum, err)
	}
	if ws := sum.DBs[0].Warnings; !slices.ContainsFunc(ws, func(w string) bool {
		return strings.HasPrefix(w, "1 document is deleted on one side and live on the other") && strings.Contains(w, `first "d"`)
	}) {
		t.Errorf("warnings %q, want d named deleted at the source and live on the target", ws)
	}
}
