package sofa_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// A document whose two leaves have a hex and a non-hex revision id of one
// generation, restored again into the database a first restore made: the
// target's winner is the archive's (each server orders them its own way,
// and so does the check), so no "not rolled back" warning.
func TestRestore_NonHexRevisionNoFalseWarning(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	c := src.Client()
	if err := c.CreateDB(ctx, "revx"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(ctx, "revx", false, json.RawMessage(`{"_id":"d","_rev":"1-a7513998018780000000000000000000","v":1}`), json.RawMessage(`{"_id":"d","_rev":"1-zzzz","v":2}`)); err != nil {
		t.Fatal(err)
	}
	ar := openAt(t, filepath.Join(t.TempDir(), "r.sofa"), nil)
	if sum, err := sofa.Backup(ctx, openAt(t, src.DBURL("revx"), nil), ar, sofa.BackupOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	tgt := couchtest.StartKind(t, src.Kind)
	dst := openAt(t, tgt.DBURL("revx"), nil)
	for i, o := range []sofa.RestoreOptions{{}, {ReuseExisting: true}} {
		sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, o)
		if err != nil || !sum.Complete() {
			t.Fatalf("restore %d: %+v, %v", i, sum, err)
		}
		for _, r := range sum.DBs {
			if w := strings.Join(r.Warnings, "\n"); strings.Contains(w, "not rolled back") {
				t.Errorf("restore %d: false warning: %s", i, w)
			}
		}
	}
	couchtest.AssertEqual(t, src.DBURL("revx"), tgt.DBURL("revx"))
}
