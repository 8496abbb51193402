package replicate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/sofadb/sofa/replicate"
)

// inlineSource is an in-memory source whose feed carries every row's
// document, as an archive's does: n generation-1 documents.
type inlineSource struct {
	n         int
	delivered atomic.Int64 // rows handed to the engine
}

func (s *inlineSource) Info(context.Context) (replicate.DBInfo, error) {
	return replicate.DBInfo{Name: "src", DocCount: int64(s.n), Identity: "mem/src"}, nil
}
func (s *inlineSource) GetLocal(context.Context, string) ([]byte, error) {
	return nil, replicate.ErrNotFound
}
func (s *inlineSource) PutLocal(context.Context, string, []byte) error { return nil }
func (s *inlineSource) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	for i := range s.n {
		id, rev := fmt.Sprintf("d%04d", i), "1-0123456789abcdef0123456789abcdef"
		d, err := replicate.ParseDoc(fmt.Appendf(nil,
			`{"_id":%q,"_rev":%q,"_revisions":{"start":1,"ids":["0123456789abcdef0123456789abcdef"]},"v":%d}`, id, rev, i))
		if err != nil {
			return err
		}
		s.delivered.Add(1)
		c := replicate.Change{Seq: replicate.Seq(fmt.Sprint(i + 1)), ID: id, Revs: []string{rev}, Docs: []*replicate.Doc{d}}
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}
func (s *inlineSource) FetchRevs(context.Context, []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	return nil, nil, errors.New("inlineSource: every revision comes with the feed")
}
func (s *inlineSource) Attachment(context.Context, string, string, *replicate.Attachment) error {
	return errors.New("inlineSource: no attachments")
}
func (s *inlineSource) Metadata(context.Context) (replicate.Metadata, error) {
	return replicate.Metadata{}, nil
}

// heldTarget is an in-memory target whose writes wait until release is
// closed; it counts the writes begun.
type heldTarget struct {
	release chan struct{}
	mu      sync.Mutex
	writes  int
	docs    int
}

func (t *heldTarget) Info(context.Context) (replicate.DBInfo, error) {
	return replicate.DBInfo{Name: "tgt", Identity: "mem/tgt"}, nil
}
func (t *heldTarget) GetLocal(context.Context, string) ([]byte, error) {
	return nil, replicate.ErrNotFound
}
func (t *heldTarget) PutLocal(context.Context, string, []byte) error { return nil }
func (t *heldTarget) RevsDiff(_ context.Context, revs map[string][]string) (map[string]replicate.Missing, error) {
	out := make(map[string]replicate.Missing, len(revs))
	for id, rs := range revs {
		out[id] = replicate.Missing{Missing: rs}
	}
	return out, nil
}
func (t *heldTarget) WriteDocs(ctx context.Context, docs []*replicate.Doc) ([]replicate.DocError, error) {
	t.mu.Lock()
	t.writes++
	t.mu.Unlock()
	select {
	case <-t.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t.mu.Lock()
	t.docs += len(docs)
	t.mu.Unlock()
	return nil, nil
}
func (t *heldTarget) SetMetadata(context.Context, replicate.Metadata, replicate.MetadataPhase) error {
	return nil
}

// A feed whose rows carry their documents runs at most one batch ahead
// of busy workers (besides the batch being cut): the documents of a
// queued batch are held outside the in-flight budget.
func TestCarriedBatchesQueueOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, rows, docs = 3, 10, 200
		src := &inlineSource{n: docs}
		tgt := &heldTarget{release: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			_, err := replicate.Run(t.Context(), src, tgt, replicate.Options{
				Workers: workers, BatchSize: rows, NoCheckpoints: true,
			})
			done <- err
		}()
		synctest.Wait() // every worker waits in a write; the feed waits to hand over
		tgt.mu.Lock()
		writes := tgt.writes
		tgt.mu.Unlock()
		if writes != workers {
			t.Fatalf("writes begun = %d, want one per worker (%d)", writes, workers)
		}
		// Held: a batch per worker, one queued, one cut and waiting.
		if got, want := src.delivered.Load(), int64((workers+2)*rows); got != want {
			t.Errorf("rows read from the feed while the workers are busy = %d, want %d", got, want)
		}
		close(tgt.release)
		if err := <-done; err != nil {
			t.Fatalf("replicate: %v", err)
		}
		if tgt.docs != docs {
			t.Errorf("docs written = %d, want %d", tgt.docs, docs)
		}
	})
}
