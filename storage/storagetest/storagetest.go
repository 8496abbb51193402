// Package storagetest is the conformance suite every storage.Store
// implementation runs.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sofadb/sofa/storage"
)

// Run checks the Store contract on fresh stores made by newStore. name
// turns a short archive name into one the store accepts (a path in a
// temporary directory for a file store).
func Run(t *testing.T, newStore func(t *testing.T) storage.Store, name func(t *testing.T, short string) string) {
	ctx := context.Background()
	payload := bytes.Repeat([]byte("sofa archive bytes "), 100000) // larger than any write buffer

	write := func(t *testing.T, s storage.Store, n string, data []byte, o storage.CreateOptions) {
		t.Helper()
		w, err := s.Create(ctx, n, o)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if err := w.Commit(); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	}
	read := func(t *testing.T, s storage.Store, n string) []byte {
		t.Helper()
		r, err := s.Open(ctx, n)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		return b
	}

	t.Run("CommitThenRead", func(t *testing.T) {
		s, n := newStore(t), name(t, "a.sofa")
		write(t, s, n, payload, storage.CreateOptions{})
		if got := read(t, s, n); !bytes.Equal(got, payload) {
			t.Fatalf("read %d bytes, wrote %d", len(got), len(payload))
		}
		st, err := s.Stat(ctx, n)
		if err != nil || st.Size != int64(len(payload)) {
			t.Fatalf("Stat = %+v, %v; want size %d", st, err, len(payload))
		}
	})

	t.Run("ReadAtAndSize", func(t *testing.T) {
		s, n := newStore(t), name(t, "a.sofa")
		write(t, s, n, payload, storage.CreateOptions{})
		r, err := s.Open(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Size() != int64(len(payload)) {
			t.Fatalf("Size = %d, want %d", r.Size(), len(payload))
		}
		buf := make([]byte, 19)
		if _, err := r.ReadAt(buf, 19*1000); err != nil || !bytes.Equal(buf, payload[:19]) {
			t.Fatalf("ReadAt = %q, %v", buf, err)
		}
		// ReadAt does not move the reading position.
		head := make([]byte, 4)
		if _, err := io.ReadFull(r, head); err != nil || string(head) != "sofa" {
			t.Fatalf("Read after ReadAt = %q, %v", head, err)
		}
		if _, err := r.ReadAt(buf, int64(len(payload))); err != io.EOF {
			t.Fatalf("ReadAt past the end: %v, want io.EOF", err)
		}
	})

	t.Run("NothingBeforeCommit", func(t *testing.T) {
		s, n := newStore(t), name(t, "a.sofa")
		w, err := s.Create(ctx, n, storage.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(payload); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, n); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("Stat before Commit: %v, want ErrNotExist", err)
		}
		if _, err := s.Open(ctx, n); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("Open before Commit: %v, want ErrNotExist", err)
		}
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, n); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("Stat after Abort: %v, want ErrNotExist", err)
		}
	})

	t.Run("AbortKeepsOld", func(t *testing.T) {
		s, n := newStore(t), name(t, "a.sofa")
		write(t, s, n, []byte("old"), storage.CreateOptions{})
		w, err := s.Create(ctx, n, storage.CreateOptions{Overwrite: true})
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("new"))
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		if got := read(t, s, n); string(got) != "old" {
			t.Fatalf("after Abort: %q, want the old archive", got)
		}
	})

	t.Run("ExistRefusedUnlessOverwrite", func(t *testing.T) {
		s, n := newStore(t), name(t, "a.sofa")
		write(t, s, n, []byte("one"), storage.CreateOptions{})
		if _, err := s.Create(ctx, n, storage.CreateOptions{}); !errors.Is(err, storage.ErrExist) {
			t.Fatalf("Create over an archive: %v, want ErrExist", err)
		}
		write(t, s, n, []byte("two"), storage.CreateOptions{Overwrite: true})
		if got := read(t, s, n); string(got) != "two" {
			t.Fatalf("after overwrite: %q", got)
		}
	})

	t.Run("Remove", func(t *testing.T) {
		s, n := newStore(t), name(t, "a.sofa")
		write(t, s, n, []byte("x"), storage.CreateOptions{})
		if err := s.Remove(ctx, n); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Stat(ctx, n); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("Stat after Remove: %v", err)
		}
		if err := s.Remove(ctx, n); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("second Remove: %v, want ErrNotExist", err)
		}
	})

	t.Run("MissingIsNotExist", func(t *testing.T) {
		s, n := newStore(t), name(t, "none.sofa")
		if _, err := s.Open(ctx, n); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("Open: %v, want ErrNotExist", err)
		}
		if _, err := s.Stat(ctx, n); !errors.Is(err, storage.ErrNotExist) {
			t.Fatalf("Stat: %v, want ErrNotExist", err)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		s, n := newStore(t), name(t, "empty.sofa")
		write(t, s, n, nil, storage.CreateOptions{})
		if got := read(t, s, n); len(got) != 0 {
			t.Fatalf("read %q from an empty archive", got)
		}
	})
}
