package sofa_test

import (
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// TestRestore_RefusedTwiceWarnedOnce: a restore into a database whose own
// validate_doc_update refuses some documents copies it once more (a
// design document of the archive might have relaxed it), is refused
// again, and reports the refused documents once and each warning once.
func TestRestore_RefusedTwiceWarnedOnce(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "vr", 4)
	if _, err := src.Client().PutDoc(ctx, "vr", "bad", map[string]any{"bad": true}); err != nil {
		t.Fatal(err)
	}
	arch := openAt(t, filepath.Join(t.TempDir(), "vr.sofa"), nil)
	if sum, err := sofa.Backup(ctx, openAt(t, src.URL, nil), arch, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	dst := couchtest.StartKind(t, src.Kind)
	if err := dst.Client().CreateDB(ctx, "vr"); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Client().PutDoc(ctx, "vr", "_design/strict", map[string]any{
		"validate_doc_update": `function(d){ if (d.bad) throw({forbidden: "no"}); }`}); err != nil {
		t.Fatal(err)
	}
	o := sofa.RestoreOptions{ReuseExisting: true}
	o.Selection.Include = []string{"vr"}
	plan, err := sofa.PlanRestore(ctx, []*sofa.Endpoint{arch}, o)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := plan.Run(ctx, openAt(t, dst.URL, nil))
	if err != nil || len(sum.DBs) != 1 {
		t.Fatalf("restore: %+v, %v", sum, err)
	}
	r := sum.DBs[0]
	held := 0
	for _, w := range r.Warnings {
		if w == replicate.WarnCheckpointHeld {
			held++
		}
	}
	if len(r.Failures) != 1 || r.Failures[0].ID != "bad" || held != 1 {
		t.Errorf("failures %v, warnings %q: want bad refused once and the held-checkpoint warning once", r.Failures, r.Warnings)
	}
}
