package sofa_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestRestore_SecurityReplacedWarned: restoring into a database that
// existed, whose `_security` gave access to others than the archive's,
// replaces it (`_security` goes last) and says so, naming both; a
// database whose `_security` is already the archive's gets no warning.
func TestRestore_SecurityReplacedWarned(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "sec", 3)
	if err := src.Client().PutSecurity(ctx, "sec", couchtest.Security{Members: couchtest.Group{Roles: []string{"_admin"}}}); err != nil {
		t.Fatal(err)
	}
	arch := openAt(t, filepath.Join(t.TempDir(), "a.sofa"), nil)
	if sum, err := sofa.Backup(ctx, openAt(t, src.URL, nil), arch, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	dst := couchtest.StartKind(t, src.Kind)
	if err := dst.Client().CreateDB(ctx, "sec"); err != nil {
		t.Fatal(err)
	}
	if err := dst.Client().PutSecurity(ctx, "sec", couchtest.Security{Admins: couchtest.Group{Names: []string{"alice"}}}); err != nil {
		t.Fatal(err)
	}
	restore := func() []string {
		t.Helper()
		plan, err := sofa.PlanRestore(ctx, []*sofa.Endpoint{arch}, sofa.RestoreOptions{ReuseExisting: true})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := plan.Run(ctx, openAt(t, dst.URL, nil))
		if err != nil || !sum.Complete() {
			t.Fatalf("restore: %+v, %v", sum, err)
		}
		var ws []string
		for _, r := range sum.DBs {
			ws = append(ws, r.Warnings...)
		}
		return ws
	}
	if ws := restore(); len(ws) != 1 || !strings.Contains(ws[0], "_security replaced") || !strings.Contains(ws[0], `"alice"`) || !strings.Contains(ws[0], `"_admin"`) {
		t.Errorf("restore over alice's _security: warnings %q, want one naming both", ws)
	}
	var sec couchtest.Security
	if err := dst.Client().GetJSON(ctx, "/sec/_security", &sec); err != nil || len(sec.Admins.Names) != 0 || len(sec.Members.Roles) != 1 {
		t.Errorf("_security after the restore: %+v, %v; want the archive's", sec, err)
	}
	if _, err := dst.Client().PutDoc(ctx, "sec", "extra", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	if ws := restore(); len(ws) != 0 {
		t.Errorf("restore again: warnings %q, want none", ws)
	}
}
