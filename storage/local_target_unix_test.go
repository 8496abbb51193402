//go:build unix

package storage

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The final name of a local archive: Create refuses, with or without
// Overwrite, a name that is not a regular file (it is never opened,
// followed or replaced), and Commit without Overwrite never replaces a
// file that appeared after Create.

// shortTempDir is a temporary directory with a path short enough for a
// unix socket's name.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sofa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// noTemps fails t when dir holds a temporary file of final name base.
func noTemps(t *testing.T, dir, base string) {
	t.Helper()
	if got := tempNames(t, dir, base); len(got) != 0 {
		t.Errorf("temporary files left: %q", got)
	}
}

// sameNode fails t when path is no longer the node before (its Lstat).
func sameNode(t *testing.T, path string, before os.FileInfo) {
	t.Helper()
	after, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s gone: %v", path, err)
	}
	if !os.SameFile(before, after) || after.Mode() != before.Mode() {
		t.Errorf("%s replaced: mode %v, was %v", path, after.Mode(), before.Mode())
	}
}

func TestCreate_RefusesNonRegular(t *testing.T) {
	dir := shortTempDir(t)
	archive := filepath.Join(dir, "real.sofa")
	if err := os.WriteFile(archive, []byte("old archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	makers := map[string]func(p string) error{
		"fifo":         func(p string) error { return unix.Mkfifo(p, 0o666) },
		"symlink":      func(p string) error { return os.Symlink(archive, p) },
		"dangling":     func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) },
		"dirsymlink":   func(p string) error { return os.Symlink(dir, p) },
		"chardev":      func(p string) error { return unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) },
		"socket":       func(p string) error { l, err := net.Listen("unix", p); t.Cleanup(func() { l.Close() }); return err },
		"directory":    func(p string) error { return os.Mkdir(p, 0o755) },
		"symlink-loop": func(p string) error { return os.Symlink(p, p) },
	}
	for kind, mk := range makers {
		for _, overwrite := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/overwrite=%v", kind, overwrite), func(t *testing.T) {
				base := fmt.Sprintf("%s-%v", kind, overwrite)
				path := filepath.Join(dir, base)
				if err := mk(path); err != nil {
					if kind == "chardev" && errors.Is(err, os.ErrPermission) {
						t.Skip("mknod not permitted:", err)
					}
					t.Fatal(err)
				}
				before, err := os.Lstat(path)
				if err != nil {
					t.Fatal(err)
				}
				want := ErrNotFile
				if kind == "directory" {
					want = ErrIsDir
				}
				sink, err := createLocal(t, path, overwrite)
				if err == nil {
					// Without the refusal, show what Commit does to the node.
					sink.Write([]byte("new archive"))
					cerr := sink.Commit()
					t.Errorf("Create accepted it (Commit: %v)", cerr)
				} else if !errors.Is(err, want) {
					t.Errorf("Create: %v, want %v", err, want)
				} else {
					t.Log(err)
				}
				sameNode(t, path, before)
				noTemps(t, dir, base)
				if b, err := os.ReadFile(archive); err != nil || string(b) != "old archive" {
					t.Errorf("symlink's target now %q, %v", b, err)
				}
			})
		}
	}
}

// A file someone else creates under the final name while the archive is
// written is not replaced without Overwrite; Commit fails with ErrExist
// and leaves no temporary file.
func TestCommit_NoReplaceOfNewFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sofa")
	sink, err := createLocal(t, path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("mine")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(); !errors.Is(err, ErrExist) {
		t.Errorf("Commit: %v, want ErrExist", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "theirs" {
		t.Errorf("final file %q, %v: replaced", b, err)
	}
	noTemps(t, dir, "x.sofa")
}

// Two writers of one new name: the first to commit wins, the second
// fails with ErrExist.
func TestCommit_ConcurrentNewName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sofa")
	a, err := createLocal(t, path, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := createLocal(t, path, false)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("a"))
	b.Write([]byte("b"))
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); !errors.Is(err, ErrExist) {
		t.Errorf("second Commit: %v, want ErrExist", err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "a" {
		t.Errorf("final file %q, %v", got, err)
	}
	noTemps(t, dir, "x.sofa")
}

// With Overwrite, Commit still replaces a regular file atomically, but
// not a node that appeared meanwhile and is no regular file.
func TestCommit_OverwriteReplacesOnlyRegular(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sofa")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	sink, err := createLocal(t, path, true)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("new"))
	if err := sink.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new" {
		t.Errorf("final file %q, %v", b, err)
	}
	noTemps(t, dir, "x.sofa")

	fifo := filepath.Join(dir, "y.sofa")
	sink, err = createLocal(t, fifo, true)
	if err != nil {
		t.Fatal(err)
	}
	sink.Write([]byte("new"))
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(fifo)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Commit(); !errors.Is(err, ErrNotFile) {
		t.Errorf("Commit over a named pipe: %v, want ErrNotFile", err)
	}
	sameNode(t, fifo, before)
	noTemps(t, dir, "y.sofa")
}
