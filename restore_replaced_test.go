package sofa_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestRestore_ReplacedListed: a restore with Replace calls Replacing
// before it deletes a non-empty target database, with what the database
// held (doc_count, doc_del_count as GET /db gives them), and the Summary
// lists it in Replaced; a database the target did not hold is created,
// not replaced, and listed in neither.
func TestRestore_ReplacedListed(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"held", "fresh"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutDoc(ctx, db, "d", map[string]any{"v": 1}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "b.sofa")
	if sum, err := sofa.Backup(ctx, openAt(t, srv.URL, nil), openAt(t, path, nil), sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"held", "fresh"}}}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	// held gets 3 more documents, one of them deleted; fresh is deleted
	for _, id := range []string{"a", "b"} {
		if _, err := c.PutDoc(ctx, "held", id, map[string]any{"v": 2}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := c.PutDoc(ctx, "held", "x", map[string]any{"v": 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "held", "x", map[string]any{"_rev": rev, "_deleted": true}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDB(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	var want fleet.Replaced
	if err := c.GetJSON(ctx, "/held", &want); err != nil {
		t.Fatal(err)
	}
	want.Name = "held"

	var mu sync.Mutex
	var told []fleet.Replaced
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{openAt(t, path, nil)}, openAt(t, srv.URL, nil), sofa.RestoreOptions{
		Selection: sofa.Selection{Include: []string{"held", "fresh"}}, Replace: true,
		Replacing: func(r fleet.Replaced) { mu.Lock(); told = append(told, r); mu.Unlock() }})
	if err != nil || !sum.Complete() {
		t.Fatalf("restore: %+v, %v", sum, err)
	}
	same := func(got []fleet.Replaced) bool {
		return len(got) == 1 && got[0].Name == want.Name && got[0].DocCount == want.DocCount &&
			(got[0].DocDelCount == nil) == (want.DocDelCount == nil) && (want.DocDelCount == nil || *got[0].DocDelCount == *want.DocDelCount)
	}
	if !same(sum.Replaced) || !same(told) {
		t.Errorf("replaced %s, told %s; want only held with doc_count %d, doc_del_count %s", replacedString(sum.Replaced), replacedString(told), want.DocCount, fmtDel(want.DocDelCount))
	}
	if srv.Kind == couchtest.CouchDB && (want.DocCount != 3 || want.DocDelCount == nil || *want.DocDelCount != 1) {
		t.Errorf("GET /held: doc_count %d, doc_del_count %s; want 3 and 1", want.DocCount, fmtDel(want.DocDelCount))
	}
}

func fmtDel(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return fmt.Sprint(*n)
}

func replacedString(rs []fleet.Replaced) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s: doc_count %d, doc_del_count %s", r.Name, r.DocCount, fmtDel(r.DocDelCount)))
	}
	return "[" + strings.Join(out, "; ") + "]"
}
