package sofa_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
)

// TestBackup_ShardRefusesAnotherSetsManifest: a sharded backup whose
// NAME.set.json describes another set (another count or set id) is
// refused before it starts (storage.ErrExist), so the complete set it
// names can still be restored by that name; its own run's workers share
// it, and Overwrite replaces it.
func TestBackup_ShardRefusesAnotherSetsManifest(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "m1", 2)
	path := filepath.Join(t.TempDir(), "f.sofa")
	backup := func(i, n int, id string, overwrite bool) error {
		t.Helper()
		_, err := sofa.Backup(ctx, openAt(t, src.URL, nil), openAt(t, path, nil),
			sofa.BackupOptions{Selection: sofa.Selection{Shard: sofa.Shard{Index: i, Count: n}}, SetID: id, Overwrite: overwrite})
		return err
	}
	for i := range 2 {
		if err := backup(i, 2, "A", false); err != nil {
			t.Fatalf("set A member %d: %v", i, err)
		}
	}
	for _, c := range []struct {
		n  int
		id string
	}{{4, "C"}, {2, "B"}} {
		if err := backup(0, c.n, c.id, false); !errors.Is(err, storage.ErrExist) {
			t.Errorf("member 0 of %d, set %s, over set A's manifest: %v, want ErrExist", c.n, c.id, err)
		}
	}
	if _, err := sofa.OpenSet(ctx, openAt(t, filepath.Join(filepath.Dir(path), "f.set.json"), nil), sofa.SetOptions{}); err != nil {
		t.Errorf("set A after the refused runs: %v", err)
	}
	if err := backup(0, 4, "C", true); err != nil {
		t.Errorf("with Overwrite: %v", err)
	}
}
