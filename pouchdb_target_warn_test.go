package sofa_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// A copy or restore into PouchDB Server says what it keeps otherwise
// (found by a tester: both were silent, and only verify --full said): a
// partitioned source database becomes a plain one, and a name with "/"
// is kept without it.
func TestPouchDBTarget_SaysWhatItKeepsOtherwise(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "the source holds a partitioned database, which PouchDB Server cannot")
	ctx := t.Context()
	src := couchtest.Start(t)
	c := src.Client()
	if _, err := c.Do(ctx, "PUT", "/part?partitioned=true", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "part", "p1:a", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	seed(t, src, "org/x", 1)
	s := openAt(t, src.URL, nil)
	tgt := couchtest.StartKind(t, couchtest.PouchDB)
	sum, err := sofa.Copy(ctx, s, openAt(t, tgt.URL, nil), sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"part", "org/x"}}})
	if err != nil || !sum.Complete() {
		t.Fatalf("copy: %+v, %v", sum, err)
	}
	checkPouchDBWarnings(t, "copy", sum)
	arch := openAt(t, t.TempDir()+"/p.sofa", nil)
	if sum, err := sofa.Backup(ctx, s, arch, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"part", "org/x"}}}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	sum, err = sofa.Restore(ctx, []*sofa.Endpoint{arch}, openAt(t, couchtest.StartKind(t, couchtest.PouchDB).URL, nil), sofa.RestoreOptions{})
	if err != nil || !sum.Complete() {
		t.Fatalf("restore: %+v, %v", sum, err)
	}
	checkPouchDBWarnings(t, "restore", sum)
}

func checkPouchDBWarnings(t *testing.T, what string, sum *sofa.Summary) {
	t.Helper()
	warned := func(db, says string) bool {
		for _, d := range sum.DBs {
			if d.Name == db {
				return slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.Contains(w, says) })
			}
		}
		return false
	}
	if !warned("part", "PouchDB Server has no partitioned databases") {
		t.Errorf("%s: part: no warning of the partitioned property lost: %+v", what, sum.DBs)
	}
	if !warned("org/x", `PouchDB Server keeps it as "orgx"`) {
		t.Errorf("%s: org/x: no warning of the name kept without /: %+v", what, sum.DBs)
	}
}
