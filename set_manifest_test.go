package sofa_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestBackup_PlainAndSetNotBoth: a plain archive and a set's manifest of
// one ARCHIVE name are never both written (restore, verify and ls of the
// name would take the plain archive and leave the set unread): a sharded
// backup to the name of an existing archive is refused, and a plain
// backup to the name of an existing set, each with an *OptionError
// naming the file that exists, whatever Overwrite says.
func TestBackup_PlainAndSetNotBoth(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "m1", 2)
	dir := t.TempDir()
	backup := func(path string, shard sofa.Shard, overwrite bool) error {
		t.Helper()
		_, err := sofa.Backup(ctx, openAt(t, src.URL, nil), openAt(t, path, nil),
			sofa.BackupOptions{Selection: sofa.Selection{Shard: shard}, SetID: "s", Overwrite: overwrite})
		return err
	}
	var oe *sofa.OptionError
	plain := filepath.Join(dir, "plain.sofa")
	if err := backup(plain, sofa.Shard{}, false); err != nil {
		t.Fatal(err)
	}
	for _, ow := range []bool{false, true} {
		if err := backup(plain, sofa.Shard{Index: 0, Count: 2}, ow); !errors.As(err, &oe) || !strings.Contains(err.Error(), "plain.sofa exists") {
			t.Errorf("sharded backup over a plain archive's name (overwrite %v): %v, want an OptionError naming it", ow, err)
		}
	}
	set := filepath.Join(dir, "set.sofa")
	if err := backup(set, sofa.Shard{Index: 0, Count: 1}, false); err != nil {
		t.Fatal(err)
	}
	for _, ow := range []bool{false, true} {
		if err := backup(set, sofa.Shard{}, ow); !errors.As(err, &oe) || !strings.Contains(err.Error(), "set.set.json exists") {
			t.Errorf("plain backup over a set's name (overwrite %v): %v, want an OptionError naming its manifest", ow, err)
		}
	}
	if _, err := os.Stat(set); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused backup left %s: %v", set, err)
	}
}

// A set manifest cut short is called damaged, not "not a set manifest"
// (found by a tester); a JSON file of another kind is still not one.
func TestOpenSet_TruncatedManifestCalledDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sofa")
	whole := `{"format":"sofa-archive-set","version":1,"count":2,"set_id":"x","members":["s.shard-0-of-2.sofa","s.shard-1-of-2.sofa"]}`
	for _, c := range []struct{ body, says string }{
		{whole[:len(whole)/2], "damaged set manifest"},
		{`{"format":"other"}`, "is not a set manifest of sofa"},
	} {
		if err := os.WriteFile(filepath.Join(dir, "s.set.json"), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := sofa.OpenSet(t.Context(), openAt(t, path, nil), sofa.SetOptions{}); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v, want an error saying %q", c.body, err, c.says)
		}
	}
}
