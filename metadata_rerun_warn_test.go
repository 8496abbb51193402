package sofa_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCopy_RerunWarnsOfMetadataReplaced: a rerun of a whole-server copy
// into databases an earlier run created writes the source's `_security`
// and `_revs_limit` over values changed on the target since, and says so
// (it reverted them without a word, as a last copy after a cut-over
// would); a rerun over unchanged ones says nothing.
func TestCopy_RerunWarnsOfMetadataReplaced(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "_revs_limit is CouchDB's")
	ctx := t.Context()
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	seed(t, src, "m", 3)
	s, d := openAt(t, src.URL, nil), openAt(t, tgt.URL, nil)
	warnings := func() []string {
		t.Helper()
		sum, err := sofa.Copy(ctx, s, d, sofa.CopyOptions{})
		if err != nil || !sum.Complete() {
			t.Fatalf("copy: %+v, %v", sum, err)
		}
		for _, r := range sum.DBs {
			if r.Name == "m" {
				return r.Warnings
			}
		}
		return nil
	}
	warnings()
	if ws := warnings(); len(ws) != 0 {
		t.Errorf("a rerun over unchanged metadata: %q, want no warning", ws)
	}
	tc := tgt.Client()
	if err := tc.PutSecurity(ctx, "m", couchtest.Security{Members: couchtest.Group{Names: []string{"newteam"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Do(ctx, "PUT", "/m/_revs_limit", strings.NewReader("3000"), nil); err != nil {
		t.Fatal(err)
	}
	ws := warnings()
	if !slices.ContainsFunc(ws, func(w string) bool {
		return strings.Contains(w, "_security replaced") && strings.Contains(w, "newteam")
	}) ||
		!slices.ContainsFunc(ws, func(w string) bool { return strings.Contains(w, "_revs_limit lowered") && strings.Contains(w, "3000") }) {
		t.Errorf("a rerun over a changed _security and _revs_limit: %q, want both named", ws)
	}
}
