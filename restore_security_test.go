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
		return restoreWarnings(t, []*sofa.Endpoint{arch}, dst, sofa.RestoreOptions{ReuseExisting: true})
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

// TestRestore_ChainSecurityWarnedOnce: a chain whose archives carry
// different `_security` objects, restored into a server without the
// database, warns of nothing (each step replaces only the chain's own);
// restored again, nothing either (the database ends as it was); over the
// state a run stopped after the first step leaves, nothing (it warned of
// the first archive's `_security`); after the target's `_security` was
// changed, one warning naming it and the chain's last one.
func TestRestore_ChainSecurityWarnedOnce(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "sec", 3)
	sc := src.Client()
	if err := sc.PutSecurity(ctx, "sec", couchtest.Security{Members: couchtest.Group{Names: []string{"boss"}}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server := openAt(t, src.URL, nil)
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, full, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("full backup: %+v, %v", sum, err)
	}
	if err := sc.PutSecurity(ctx, "sec", couchtest.Security{Members: couchtest.Group{Names: []string{"carol"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.PutDoc(ctx, "sec", "later", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: full.Archive()}); err != nil || !sum.Complete() {
		t.Fatalf("incremental backup: %+v, %v", sum, err)
	}
	dst := couchtest.StartKind(t, src.Kind)
	restore := func() []string {
		t.Helper()
		var ws []string
		for _, w := range restoreWarnings(t, []*sofa.Endpoint{full, inc}, dst, sofa.RestoreOptions{ReuseExisting: true}) {
			if strings.Contains(w, "_security") {
				ws = append(ws, w)
			}
		}
		return ws
	}
	if ws := restore(); len(ws) != 0 {
		t.Errorf("chain into an empty server: %q, want no _security warning", ws)
	}
	if ws := restore(); len(ws) != 0 {
		t.Errorf("the same chain again: %q, want no _security warning", ws)
	}
	// a run of the chain stopped after its first step left the first
	// archive's _security (boss): run again, the chain names nobody
	dst2 := couchtest.StartKind(t, src.Kind)
	restoreWarnings(t, []*sofa.Endpoint{full}, dst2, sofa.RestoreOptions{})
	var ws2 []string
	for _, w := range restoreWarnings(t, []*sofa.Endpoint{full, inc}, dst2, sofa.RestoreOptions{ReuseExisting: true}) {
		if strings.Contains(w, "_security") {
			ws2 = append(ws2, w)
		}
	}
	if len(ws2) != 0 {
		t.Errorf("the chain over its own first step: %q, want no _security warning", ws2)
	}
	if err := dst.Client().PutSecurity(ctx, "sec", couchtest.Security{Admins: couchtest.Group{Names: []string{"dave"}}}); err != nil {
		t.Fatal(err)
	}
	if ws := restore(); len(ws) != 1 || !strings.Contains(ws[0], `"dave"`) || !strings.Contains(ws[0], `"carol"`) || strings.Contains(ws[0], `"boss"`) {
		t.Errorf("over dave's _security: %q, want one warning naming dave and the chain's last (carol)", ws)
	}
}
