package storage

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory is a Store that keeps archives in memory (tests). The zero value
// is empty and ready to use.
type Memory struct {
	mu    sync.Mutex
	files map[string]memFile
}

type memFile struct {
	data    []byte
	modTime time.Time
}

var _ Store = (*Memory)(nil)

// Create implements Store.
func (m *Memory) Create(ctx context.Context, name string, o CreateOptions) (Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; ok && !o.Overwrite {
		return nil, fmt.Errorf("%s %w", name, ErrExist)
	}
	return &memWriter{m: m, name: name}, nil
}

type memWriter struct {
	m    *Memory
	name string
	buf  bytes.Buffer
	done bool
}

func (w *memWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, fmt.Errorf("%s: write after commit or abort", w.name)
	}
	return w.buf.Write(p)
}

func (w *memWriter) Commit() error {
	if w.done {
		return fmt.Errorf("%s: commit after commit or abort", w.name)
	}
	w.done = true
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	if w.m.files == nil {
		w.m.files = map[string]memFile{}
	}
	w.m.files[w.name] = memFile{data: bytes.Clone(w.buf.Bytes()), modTime: time.Now()}
	return nil
}

func (w *memWriter) Abort() error {
	w.done = true
	w.buf = bytes.Buffer{}
	return nil
}

// Open implements Store.
func (m *Memory) Open(ctx context.Context, name string) (Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[name]
	if !ok {
		return nil, fmt.Errorf("archive %s %w", name, ErrNotExist)
	}
	return &memReader{Reader: bytes.NewReader(f.data)}, nil
}

type memReader struct{ *bytes.Reader }

func (r *memReader) Close() error { return nil }
func (r *memReader) Size() int64  { return r.Reader.Size() }

// Stat implements Store.
func (m *Memory) Stat(ctx context.Context, name string) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[name]
	if !ok {
		return Info{}, fmt.Errorf("archive %s %w", name, ErrNotExist)
	}
	return Info{Name: name, Size: int64(len(f.data)), ModTime: f.modTime}, nil
}

// Remove implements Store.
func (m *Memory) Remove(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; !ok {
		return fmt.Errorf("archive %s %w", name, ErrNotExist)
	}
	delete(m.files, name)
	return nil
}
