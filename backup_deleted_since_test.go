package sofa_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// An incremental backup names the databases of the previous archive
// deleted at the source since (Summary.DeletedSincePrevious), which it
// does not hold and a restore of the chain leaves out; one the selection
// leaves out while the source still holds it is refused (*OptionError).
func TestBackup_DeletedSincePrevious(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"keep", "gone-a", "gone-b", "still"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutDoc(ctx, db, "d", map[string]any{"db": db}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	server := openAt(t, srv.URL, nil)
	sel := sofa.Selection{Exclude: []string{"_*"}}
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, full, sofa.BackupOptions{Selection: sel}); err != nil || !sum.Complete() || len(sum.DeletedSincePrevious) != 0 {
		t.Fatalf("full backup: %+v, %v", sum, err)
	}
	for _, db := range []string{"gone-b", "gone-a"} {
		if err := c.DeleteDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: full.Archive(), Selection: sel})
	if err != nil || !sum.Complete() || sum.DBsTotal != 2 {
		t.Fatalf("incremental backup: %+v, %v; want keep and still, complete", sum, err)
	}
	if want := []string{"gone-a", "gone-b"}; !slices.Equal(sum.DeletedSincePrevious, want) {
		t.Errorf("deleted since the previous archive: %q, want %q", sum.DeletedSincePrevious, want)
	}
	// still is on the source: leaving it out would lose it from the chain
	_, err = sofa.Backup(ctx, server, openAt(t, filepath.Join(dir, "inc2.sofa"), nil), sofa.BackupOptions{Since: inc.Archive(), Selection: sofa.Selection{Include: []string{"keep"}}})
	var oe *sofa.OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "(still)") {
		t.Errorf("incremental leaving out still: %v; want an *OptionError naming still", err)
	}
}
