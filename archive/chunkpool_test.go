package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sofadb/sofa/replicate"
)

// gatedWriter passes writes through while open; closed, it blocks them
// until opened again, or fails them once broken.
type gatedWriter struct {
	mu     sync.Mutex
	cond   *sync.Cond
	closed bool
	broken error
	buf    bytes.Buffer
}

func newGatedWriter() *gatedWriter {
	g := &gatedWriter{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.closed && g.broken == nil {
		g.cond.Wait()
	}
	if g.broken != nil {
		return 0, g.broken
	}
	return g.buf.Write(p)
}

func (g *gatedWriter) set(closed bool, broken error) {
	g.mu.Lock()
	g.closed, g.broken = closed, broken
	g.mu.Unlock()
	g.cond.Broadcast()
}

func manyDocs(prefix string, n int) []*replicate.Doc {
	docs := make([]*replicate.Doc, n)
	for i := range docs {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		docs[i] = doc(id, "1-abc", false, fmt.Sprintf(`{"_id":%q,"_rev":"1-abc","n":%d,"pad":"%s"}`, id, i, strings.Repeat("p", i%50)))
	}
	return docs
}

// chunkOrder lists each database's doc chunk numbers in stream order.
func chunkOrder(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		dir, rest, ok := strings.Cut(strings.TrimPrefix(h.Name, "db/"), "/docs-")
		if ok {
			out[dir] = append(out[dir], rest[:6])
		}
	}
}

// Chunks compressed in parallel are written in number order, direct and
// spooled groups alike, whatever the workers' timing.
func TestChunkOrder(t *testing.T) {
	for _, workers := range []int{1, 2, MaxChunkWorkers} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, Options{ChunkSize: 512, ChunkWorkers: workers, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			want := map[string][]*replicate.Doc{}
			var wg sync.WaitGroup
			for _, name := range []string{"a", "b", "c"} {
				d, err := w.Database(name)
				if err != nil {
					t.Fatal(err)
				}
				docs := manyDocs(name, 600)
				want[name] = docs
				wg.Add(1)
				go func() {
					defer wg.Done()
					var inner sync.WaitGroup
					for k := range 4 { // the engine's workers, batches of 10
						inner.Add(1)
						go func() {
							defer inner.Done()
							for i := k * 10; i < 600; i += 40 {
								if _, err := d.WriteDocs(ctx, docs[i:i+10]); err != nil {
									t.Error(err)
									return
								}
							}
						}()
					}
					inner.Wait()
					if err := d.Close(); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			order := chunkOrder(t, buf.Bytes())
			for name, nums := range order {
				if len(nums) < 20 {
					t.Fatalf("%s: only %d chunks", name, len(nums))
				}
				for i, n := range nums {
					if want := fmt.Sprintf("%06d", i+1); n != want {
						t.Fatalf("%s: chunk %d in the stream is number %s (order %v)", name, i+1, n, nums)
					}
				}
			}
			_, got := readArchive(t, buf.Bytes())
			for name, docs := range want {
				byID := map[string]*replicate.Doc{}
				for _, d := range got[name].docs {
					byID[d.ID] = d
				}
				var same []*replicate.Doc
				for _, d := range docs {
					same = append(same, byID[d.ID])
				}
				if len(got[name].docs) != len(docs) || same[len(same)-1] == nil {
					t.Fatalf("%s: read %d revisions, wrote %d", name, len(got[name].docs), len(docs))
				}
				equalDocs(t, name, same, docs)
			}
		})
	}
}

// While the sink does not take writes, WriteDocs stops once every pool
// slot holds a chunk: the archive holds at most ChunkWorkers chunks plus
// the pending one, however many revisions arrive (2000 revisions make
// about 100 chunks here). Opening the sink lets
// everything through, in order.
func TestChunkPoolBound(t *testing.T) {
	const workers = 2
	g := newGatedWriter()
	w, err := NewWriter(g, Options{ChunkSize: 1024, ChunkWorkers: workers})
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.Database("db")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.SetMetadata(ctx, replicate.Metadata{}, replicate.BeforeDocs); err != nil {
		t.Fatal(err) // the meta member goes out while the sink is open
	}
	g.set(true, nil)
	docs := manyDocs("d", 2000) // about 100 chunks
	done := make(chan error, 1)
	go func() {
		for i := 0; i < len(docs); i += 50 {
			if _, err := d.WriteDocs(ctx, docs[i:i+50]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(w.pool.slots) < workers && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("WriteDocs returned (%v) with the sink closed", err)
	case <-time.After(100 * time.Millisecond):
	}
	// (d.mu is held by the WriteDocs waiting for a slot: by design, the
	// database's other callers wait with it)
	if n := len(w.pool.slots); n != workers {
		t.Fatalf("%d slots taken, want %d", n, workers)
	}
	g.set(false, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(w.pool.slots); n != 0 {
		t.Fatalf("%d slots still taken", n)
	}
	_, got := readArchive(t, g.buf.Bytes())
	equalDocs(t, "db", got["db"].docs, docs)
}

// A WriteDocs waiting for a pool slot gives up when its context ends.
func TestChunkPoolCancel(t *testing.T) {
	g := newGatedWriter()
	w, err := NewWriter(g, Options{ChunkSize: 1024, ChunkWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := w.Database("db")
	_ = d.SetMetadata(context.Background(), replicate.Metadata{}, replicate.BeforeDocs)
	g.set(true, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := d.WriteDocs(ctx, manyDocs("d", 500))
		done <- err
	}()
	// Cancel once the only slot is taken (its chunk blocked in the
	// sink): the WriteDocs is then waiting for a slot, or about to.
	deadline := time.Now().Add(time.Minute)
	for len(w.pool.slots) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("no chunk reached the pool")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WriteDocs = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteDocs still waiting after cancel")
	}
	g.set(false, errors.New("sink gone")) // let the queued chunk fail
	if err := d.Abort("cancelled"); err == nil {
		t.Fatal("Abort after a failed chunk succeeded")
	}
}

// A sink that fails while chunks are in the pool: the error reaches a
// later WriteDocs or Close, nothing hangs, and Writer.Close fails too.
func TestChunkPoolSinkError(t *testing.T) {
	g := newGatedWriter()
	w, err := NewWriter(g, Options{ChunkSize: 1024, ChunkWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := w.Database("db")
	ctx := context.Background()
	_ = d.SetMetadata(ctx, replicate.Metadata{}, replicate.BeforeDocs)
	boom := errors.New("disk full")
	g.set(false, boom)
	docs := manyDocs("d", 2000)
	var werr error
	for i := 0; i < len(docs) && werr == nil; i += 50 {
		_, werr = d.WriteDocs(ctx, docs[i:i+50])
	}
	cerr := d.Close()
	if !errors.Is(werr, boom) && !errors.Is(cerr, boom) {
		t.Fatalf("WriteDocs = %v, Close = %v; want %v", werr, cerr, boom)
	}
	if err := w.Close(); !errors.Is(err, boom) {
		t.Fatalf("Writer.Close = %v, want %v", err, boom)
	}
}
