package sofa_test

import (
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCopy_ReusedMetadataReplacedWarned: a whole-server copy into an
// existing database that held documents (ReuseExisting) gives it the
// source's `_security` and `_revs_limit`, and says what it replaced: a
// `_security` naming someone else, a higher `_revs_limit` (CouchDB). A
// database whose `_security` and `_revs_limit` are already the source's
// gets no warning; nor does a rerun.
func TestCopy_ReusedMetadataReplacedWarned(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	dst := couchtest.StartKind(t, src.Kind)
	couch := src.Kind == couchtest.CouchDB
	srcSec := couchtest.Security{Members: couchtest.Group{Names: []string{"ann"}}}
	for _, db := range []string{"changed", "same"} {
		seed(t, src, db, 3)
		if err := src.Client().PutSecurity(ctx, db, srcSec); err != nil {
			t.Fatal(err)
		}
		if err := dst.Client().CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := dst.Client().PutDoc(ctx, db, "own", map[string]any{"v": 1}); err != nil {
			t.Fatal(err)
		}
		sec := srcSec
		if db == "changed" {
			sec = couchtest.Security{Members: couchtest.Group{Names: []string{"tgtuser"}}}
		}
		if err := dst.Client().PutSecurity(ctx, db, sec); err != nil {
			t.Fatal(err)
		}
	}
	if couch {
		if err := src.Client().PutJSON(ctx, "/changed/_revs_limit", 77, nil); err != nil {
			t.Fatal(err)
		}
		if err := dst.Client().PutJSON(ctx, "/changed/_revs_limit", 5000, nil); err != nil {
			t.Fatal(err)
		}
	}
	copyAll := func() map[string][]string {
		t.Helper()
		sum, err := sofa.Copy(ctx, openAt(t, src.URL, nil), openAt(t, dst.URL, nil),
			sofa.CopyOptions{ReuseExisting: true, Selection: sofa.Selection{Include: []string{"changed", "same"}}})
		if err != nil || !sum.Complete() {
			t.Fatalf("copy: %+v, %v", sum, err)
		}
		out := map[string][]string{}
		for _, r := range sum.DBs {
			out[r.Name] = r.Warnings
		}
		return out
	}
	ws := copyAll()
	w := strings.Join(ws["changed"], "\n")
	if !strings.Contains(w, "_security replaced") || !strings.Contains(w, `"tgtuser"`) || !strings.Contains(w, `"ann"`) {
		t.Errorf("changed: warnings %q, want one that _security naming tgtuser was replaced by the source's naming ann", ws["changed"])
	}
	if couch && (!strings.Contains(w, "_revs_limit lowered to the source's 77") || !strings.Contains(w, "5000")) {
		t.Errorf("changed: warnings %q, want one that _revs_limit 5000 was lowered to 77", ws["changed"])
	}
	if len(ws["same"]) != 0 {
		t.Errorf("same: warnings %q, want none (its _security is the source's)", ws["same"])
	}
	if ws = copyAll(); len(ws["changed"])+len(ws["same"]) != 0 {
		t.Errorf("rerun: warnings %q, want none (nothing replaced)", ws)
	}
}
