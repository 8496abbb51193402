package storage_test

import (
	"bytes"
	"context"
	"errors"
	"io"
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
