package sofa_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/storage"
)

// --force (Overwrite) replaces an archive, never another object under the
// archive's name: a backup of an archive into a name holding something
// else is refused as a usage error and the object is left as it was.
func TestOverwriteReplacesArchivesOnly(t *testing.T) {
	ctx := context.Background()
	st := &storage.Memory{}
	exampleArchive(st, "nightly.sofa", 3)
	w, err := st.Create(ctx, "notes.txt", storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("precious")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	a, err := sofa.Open(ctx, "nightly.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	b, err := sofa.Open(ctx, "notes.txt", sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sofa.Backup(ctx, a, b, sofa.BackupOptions{Overwrite: true})
	var oe *sofa.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("backup --force over a file that is not an archive: %v, want an *OptionError", err)
	}
	r, err := st.Open(ctx, "notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	n, _ := r.ReadAt(got, 0)
	r.Close()
	if string(got[:n]) != "precious" {
		t.Fatalf("notes.txt now holds %q", got[:n])
	}
	// An archive under the name is replaced.
	exampleArchive(st, "old.sofa", 1)
	c, err := sofa.Open(ctx, "old.sofa", sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sofa.Backup(ctx, a, c, sofa.BackupOptions{Overwrite: true}); err != nil {
		t.Fatalf("backup --force over an archive: %v", err)
	}
}
