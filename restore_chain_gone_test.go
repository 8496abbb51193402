package sofa_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestRestore_ChainGoneLeftOut: a database deleted at the source between
// a full backup and its incremental is not restored from the chain; the
// Summary lists it in LeftOut with the reason, not among DBs and in no
// count (it was counted ok before). Selected alone, it is no "nothing
// selected" error. One server: the chain is restored under new names.
func TestRestore_ChainGoneLeftOut(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"keep", "gone"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutDoc(ctx, db, "d", map[string]any{"v": 1}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	server := openAt(t, srv.URL, nil)
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, full, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"keep", "gone"}}}); err != nil || !sum.Complete() {
		t.Fatalf("full backup: %+v, %v", sum, err)
	}
	if err := c.DeleteDB(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	if sum, err := sofa.Backup(ctx, server, inc, sofa.BackupOptions{Since: full.Archive(), Selection: sofa.Selection{Include: []string{"keep"}}}); err != nil || !sum.Complete() {
		t.Fatalf("incremental backup: %+v, %v", sum, err)
	}

	for _, tc := range []struct {
		include []string
		ok      int
	}{{[]string{"keep", "gone"}, 1}, {[]string{"gone"}, 0}} {
		renames := map[string]string{"keep": "keep-" + tc.include[0], "gone": "gone-" + tc.include[0]}
		plan, err := sofa.PlanRestore(ctx, []*sofa.Endpoint{full, inc}, sofa.RestoreOptions{Selection: sofa.Selection{Include: tc.include}, Renames: renames})
		if err != nil {
			t.Fatal(err)
		}
		sum, err := plan.Run(ctx, openAt(t, srv.URL, nil))
		if err != nil {
			t.Fatalf("%v: restore: %+v, %v", tc.include, sum, err)
		}
		if sum.DBsTotal != tc.ok || sum.DBsOK != tc.ok || !sum.Complete() {
			t.Errorf("%v: dbs_total=%d dbs_ok=%d, want %d and %d", tc.include, sum.DBsTotal, sum.DBsOK, tc.ok, tc.ok)
		}
		for _, r := range sum.DBs {
			if r.Name == renames["gone"] {
				t.Errorf("%v: %s, not restored, is among the databases: %+v", tc.include, r.Name, r)
			}
		}
		if len(sum.LeftOut) != 1 || sum.LeftOut[0].Name != renames["gone"] ||
			!strings.Contains(sum.LeftOut[0].Reason, "deleted at the source since "+full.Archive()) {
			t.Errorf("%v: left_out %+v, want %s deleted at the source since %s", tc.include, sum.LeftOut, renames["gone"], full.Archive())
		}
		var info map[string]any
		if err := c.GetJSON(ctx, "/"+renames["gone"], &info); couchtest.StatusOf(err) != 404 {
			t.Errorf("%v: %s on the target: %v (%v), want 404", tc.include, renames["gone"], info, err)
		}
	}
}
