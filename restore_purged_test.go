package sofa_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestRestore_PurgedOnTargetNamed: a document purged on the target after
// a restore is not written again by a restore that resumes from that
// restore's checkpoint; the restore says so in its own words (not on the
// target at all; --no-checkpoints writes it again), not as a document
// "not rolled back".
func TestRestore_PurgedOnTargetNamed(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's _purge")
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "p", 5)
	arch := openAt(t, filepath.Join(t.TempDir(), "p.sofa"), nil)
	if sum, err := sofa.Backup(ctx, openAt(t, src.URL, nil), arch, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	dst := couchtest.StartKind(t, src.Kind)
	restore := func() []string {
		t.Helper()
		return restoreWarnings(t, []*sofa.Endpoint{arch}, dst, sofa.RestoreOptions{ReuseExisting: true})
	}
	if ws := restore(); len(ws) != 0 {
		t.Fatalf("first restore: %q", ws)
	}
	var d struct {
		Rev string `json:"_rev"`
	}
	c := dst.Client()
	if err := c.GetJSON(ctx, "/p/doc001", &d); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "POST", "/p/_purge", []byte(`{"doc001":["`+d.Rev+`"]}`), nil); err != nil {
		t.Fatal(err)
	}
	ws := restore()
	if len(ws) != 1 || !strings.Contains(ws[0], "not restored: 1 of 5 documents of the archive are not on the target at all") {
		t.Errorf("restore after a purge on the target: %q, want one warning naming 1 of 5 not on the target", ws)
	}
}
