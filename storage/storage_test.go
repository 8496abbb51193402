package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/storage"
	"github.com/sofadb/sofa/storage/storagetest"
)

func TestLocalConformance(t *testing.T) {
	dir := ""
	storagetest.Run(t,
		func(t *testing.T) storage.Store { dir = t.TempDir(); return storage.Local{} },
		func(t *testing.T, short string) string { return filepath.Join(dir, short) })
}

func TestMemoryConformance(t *testing.T) {
	storagetest.Run(t,
		func(t *testing.T) storage.Store { return &storage.Memory{} },
		func(t *testing.T, short string) string { return short })
}

// TestLocalStdio: "-" reads the store's stdin and writes its stdout;
// stdin cannot be read at an offset.
func TestLocalStdio(t *testing.T) {
	var out bytes.Buffer
	l := storage.Local{Stdin: strings.NewReader("from stdin"), Stdout: &out}
	w, err := l.Create(context.Background(), "-", storage.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("to stdout"))
	if out.Len() != 0 {
		t.Fatalf("%q on stdout before Commit (buffered until then)", out.String())
	}
	if err := w.Commit(); err != nil || out.String() != "to stdout" {
		t.Fatalf("stdout %q, %v", out.String(), err)
	}
	r, err := l.Open(context.Background(), "-")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "from stdin" {
		t.Fatalf("stdin %q, %v", b, err)
	}
	if r.Size() != -1 {
		t.Errorf("stdin Size = %d, want -1", r.Size())
	}
	if _, err := r.ReadAt(make([]byte, 1), 0); !errors.Is(err, storage.ErrNotSeekable) {
		t.Errorf("stdin ReadAt: %v, want ErrNotSeekable", err)
	}
}

// TestLocalCreate_MissingDirectory: an archive path whose directory does
// not exist as the system resolves it is refused by Create, before
// anything is written, and the error names the path as given, not the
// hidden temporary file: "sub/../x.sofa" with no sub (Go would clean it
// to "x.sofa"; the kernel does not), a missing directory, and a file
// taken for a directory. A bare name and "./x.sofa" are written where
// they say.
func TestLocalCreate_MissingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("file", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sub/../x.sofa", filepath.Join(dir, "no", "such", "x.sofa"), "file/x.sofa"} {
		_, err := storage.Local{}.Create(context.Background(), p, storage.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "create archive "+p+": ") || strings.Contains(err.Error(), ".tmp-") {
			t.Errorf("Create(%q): %v, want an error naming %q and not the temporary file", p, err, p)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the refused creations left files: %v", entries)
	}
	for _, p := range []string{"x.sofa", "./y.sofa"} {
		w, err := storage.Local{}.Create(context.Background(), p, storage.CreateOptions{})
		if err != nil {
			t.Fatalf("Create(%q): %v", p, err)
		}
		w.Write([]byte("archive"))
		if err := w.Commit(); err != nil {
			t.Fatalf("Commit(%q): %v", p, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, filepath.Base(p))); err != nil || string(b) != "archive" {
			t.Errorf("%s holds %q (%v)", p, b, err)
		}
	}
}
