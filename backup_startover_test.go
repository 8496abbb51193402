package sofa_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// An incremental backup that cannot continue the previous archive for a
// database (recreated at the source since) backs it up in full and says
// so in the database's warnings (a backup's engine warnings otherwise go
// to the log only).
func TestBackup_IncrementalInFullSaysSo(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	c := srv.Client()
	put := func(n int) {
		for i := range n {
			if _, err := c.PutDoc(ctx, "so", fmt.Sprintf("d%02d", i), map[string]any{"n": n}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.CreateDB(ctx, "so"); err != nil {
		t.Fatal(err)
	}
	put(3)
	dir := t.TempDir()
	server := openAt(t, srv.URL, nil)
	sel := sofa.Selection{Include: []string{"so"}}
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, full, sofa.BackupOptions{Selection: sel}); err != nil || !sum.Complete() {
		t.Fatalf("full backup: %+v, %v", sum, err)
	}
	if err := c.DeleteDB(ctx, "so"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, "so"); err != nil {
		t.Fatal(err)
	}
	put(6)
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: full.Archive(), Selection: sel})
	if err != nil || !sum.Complete() || sum.DocsWritten != 6 {
		t.Fatalf("incremental backup: %+v, %v; want the 6 documents of the new database", sum, err)
	}
	if w := strings.Join(sum.DBs[0].Warnings, "\n"); !strings.Contains(w, replicate.StartOverNote) {
		t.Errorf("the database backed up in full does not say so: warnings %q", sum.DBs[0].Warnings)
	}
}
