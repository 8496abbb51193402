package sofa_test

import (
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// TestRestore_ChainContinuesPartialBackup: a backup whose copy of a
// database failed part way (the source refused a read) and the
// incremental backup after it, which continues from what the first
// reached, hold the database whole together: the chain restores every
// document with no failure, and so does the archive the chain is
// consolidated into. A restore of the first archive alone still fails
// the database.
func TestRestore_ChainContinuesPartialBackup(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "the fault is a refused _bulk_get, which an initial copy from PouchDB Server does not send (its feed carries the documents)")
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "d", 6000)
	seed(t, src, "other", 3)
	p := faultproxy.StartT(t, src.URL)
	refused := faultproxy.Rule{Name: "refused", Method: "POST", Path: `^/d/_bulk_get$`, After: 8, Fault: faultproxy.Status, Status: 403}
	if err := p.SetRules(refused); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	full := openAt(t, filepath.Join(dir, "full.sofa"), nil)
	sum, err := sofa.Backup(ctx, openAt(t, p.URL, nil), full, sofa.BackupOptions{})
	if err != nil || sum.DBsFailed != 1 || p.Rule(refused.Name).Fired == 0 {
		t.Fatalf("backup through the refusing proxy: %+v, %v, refusals %d; want d failed part way", sum, err, p.Rule(refused.Name).Fired)
	}
	if _, dbs := listArchive(t, full); dbs["d"].Error == "" || dbs["d"].Revisions == 0 || dbs["d"].Revisions >= 6000 {
		t.Fatalf("d in the first archive: error %q, %d revisions; want part of it, marked not whole", dbs["d"].Error, dbs["d"].Revisions)
	}
	inc := openAt(t, filepath.Join(dir, "inc.sofa"), nil)
	if sum, err := sofa.Backup(ctx, openAt(t, src.URL, nil), inc, sofa.BackupOptions{Since: full.Archive()}); err != nil || !sum.Complete() {
		t.Fatalf("incremental backup: %+v, %v", sum, err)
	}
	chain := []*sofa.Endpoint{full, inc}

	dst := couchtest.StartKind(t, src.Kind)
	restoreInto(t, chain, dst)
	for _, db := range []string{"d", "other"} {
		assertSame(t, src, dst, db)
	}

	cons := openAt(t, filepath.Join(dir, "cons.sofa"), nil)
	plan, err := sofa.PlanRestore(ctx, chain, sofa.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := plan.Run(ctx, cons); err != nil || !sum.Complete() {
		t.Fatalf("consolidation: %+v, %v", sum, err)
	}
	if _, dbs := listArchive(t, cons); dbs["d"].Error != "" {
		t.Errorf("d in the consolidated archive: marked not whole (%q)", dbs["d"].Error)
	}
	dst2 := couchtest.StartKind(t, src.Kind)
	restoreInto(t, []*sofa.Endpoint{cons}, dst2)
	assertSame(t, src, dst2, "d")

	// The first archive alone holds d in part: still a failure.
	dst3 := openAt(t, couchtest.StartKind(t, src.Kind).URL, nil)
	sum, err = sofa.Restore(ctx, []*sofa.Endpoint{full}, dst3, sofa.RestoreOptions{Selection: sofa.Selection{Include: []string{"d"}}})
	if err != nil || len(sum.DBs) != 1 || sum.DBs[0].Status != fleet.StatusFailed {
		t.Errorf("restore of the first archive alone: %+v, %v; want d failed", sum, err)
	}
}
