package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// An incremental backup says which databases of the previous archive it
// does not hold, being deleted at the source since, and that a restore
// of the chain leaves them out: one line each, or past five one line
// with their count and the first five; --json lists them all.
func TestCLI_BackupDeletedSincePrevious(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	dbs := []string{"keep"}
	for i := 1; i <= 7; i++ {
		dbs = append(dbs, fmt.Sprintf("d%d", i))
	}
	for _, db := range dbs {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		cliLoad(t, srv, db, 2)
	}
	dir := t.TempDir()
	ar := func(n string) string { return filepath.Join(dir, n) }
	if r := runSofa(t, bin, "backup", "-q", "--exclude", "_*", srv.URL, ar("full.sofa")); r.code != exitOK {
		t.Fatalf("full backup: exit %d\n%s", r.code, r.stderr)
	}
	del := func(names ...string) {
		for _, n := range names {
			if err := c.DeleteDB(t.Context(), n); err != nil {
				t.Fatal(err)
			}
		}
	}
	del("d1")
	r := runSofa(t, bin, "backup", "--since", ar("full.sofa"), "--exclude", "_*", srv.URL, ar("inc1.sofa"))
	want := fmt.Sprintf(`sofa: database "d1" of %s is not in %s: deleted at the source since; a restore of the chain leaves it out (restore the archives up to %s to get it back)`, ar("full.sofa"), ar("inc1.sofa"), ar("full.sofa"))
	if r.code != exitOK || !strings.Contains(r.stderr, want+"\n") {
		t.Errorf("incremental after d1 was deleted: exit %d, want %d and the line\n%s\ngot:\n%s", r.code, exitOK, want, r.stderr)
	}
	del("d2", "d3", "d4", "d5", "d6", "d7")
	r = runSofa(t, bin, "backup", "--since", ar("inc1.sofa"), "--exclude", "_*", srv.URL, ar("inc2.sofa"))
	want = fmt.Sprintf(`sofa: 6 databases of %s are not in %s: deleted at the source since ("d2", "d3", "d4", "d5", "d6", ...); a restore of the chain leaves them out (restore the archives up to %s to get them back)`, ar("inc1.sofa"), ar("inc2.sofa"), ar("inc1.sofa"))
	if r.code != exitOK || !strings.Contains(r.stderr, want+"\n") || strings.Count(r.stderr, "deleted at the source since") != 1 {
		t.Errorf("incremental after 6 were deleted: exit %d, want %d and the one line\n%s\ngot:\n%s", r.code, exitOK, want, r.stderr)
	}
	r = runSofa(t, bin, "backup", "--json", "--since", ar("inc1.sofa"), "--exclude", "_*", srv.URL, ar("inc2j.sofa"))
	var doc struct {
		Deleted []string `json:"deleted_since_previous"`
		DBsOK   int      `json:"dbs_ok"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("--json: %v:\n%s", err, r.stdout)
	}
	if w := []string{"d2", "d3", "d4", "d5", "d6", "d7"}; r.code != exitOK || !slices.Equal(doc.Deleted, w) || doc.DBsOK != 1 {
		t.Errorf("--json: exit %d, deleted_since_previous %q, dbs_ok %d; want %d, %q, 1", r.code, doc.Deleted, doc.DBsOK, exitOK, w)
	}
}
