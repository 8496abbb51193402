package replicate

import (
	"context"
	"sync"
)

// tracker keeps two prefixes of the batch numbers: the seq up to which
// every batch is acknowledged (through: the checkpoint's), and the seq up
// to which every batch is finished, with failures or not (readThrough:
// where a Session's next pass reads on). A batch in which some revision
// was not copied stops the first prefix for the rest of the run (held),
// so that a later run reads those changes again and retries them; the
// second goes on. Only batches not yet passed by the prefixes are
// remembered, so a continuous run that goes on for days after a failure
// holds no more than its batches in flight.
type tracker struct {
	mu     sync.Mutex
	seqs   map[int64]Seq
	tails  map[int64]*anchor
	tail   *anchor // the last revision of the acknowledged prefix
	fin    map[int64]bool
	failed map[int64]bool
	next   int64
	thru   Seq
	read   Seq
	stuck  bool
	// inherited: the tracker started held (a Session pass after one whose
	// failures it cannot retry).
	inherited bool
	// working holds the batches cut whose revisions other than held
	// design documents are not all written yet (started, docsWritten): a
	// design document waits for them too (waitOthers). CouchDB's
	// clustered feed merges its shards' feeds as they come, so a document
	// written on the source before a design document may come after it in
	// the feed, in a later batch.
	working map[int64]bool
	// moved, when not nil, is closed when the prefix moves or a cut
	// batch's documents are written (waitPrefix, waitOthers).
	moved chan struct{}
}

func newTracker() *tracker {
	return &tracker{seqs: map[int64]Seq{}, tails: map[int64]*anchor{}, fin: map[int64]bool{}, failed: map[int64]bool{}, working: map[int64]bool{}}
}

// started records batch n, cut, its seq and its last revision (tail;
// nil: none fit for a checkpoint).
func (t *tracker) started(n int64, seq Seq, tail *anchor) {
	t.mu.Lock()
	t.working[n] = true
	t.seqs[n] = seq
	if tail != nil {
		t.tails[n] = tail
	}
	t.mu.Unlock()
}

func (t *tracker) done(n int64, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fin[n] = true
	if failed {
		t.failed[n] = true
	}
	defer t.signal()
	for t.fin[t.next] {
		if t.failed[t.next] {
			t.stuck = true
		}
		if s := t.seqs[t.next]; len(s) > 0 {
			t.read = s
			if !t.stuck {
				t.thru = s
			}
		}
		if a := t.tails[t.next]; a != nil && !t.stuck {
			t.tail = a
		}
		delete(t.fin, t.next)
		delete(t.seqs, t.next)
		delete(t.tails, t.next)
		delete(t.failed, t.next)
		t.next++
	}
}

// signal wakes the waitPrefix callers (t.mu held).
func (t *tracker) signal() {
	if t.moved != nil {
		close(t.moved)
		t.moved = nil
	}
}

// prefixDone reports, without waiting, what waitPrefix(n) waits for.
func (t *tracker) prefixDone(n int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next >= n
}

// waitPrefix waits until every batch numbered below n is finished (with
// failures or not). It fails only when ctx ends.
func (t *tracker) waitPrefix(ctx context.Context, n int64) error {
	return t.waitUntil(ctx, func() bool { return t.next >= n })
}

// waitUntil waits until cond, called with t.mu held, is true; it is
// asked again each time the tracker signals a move. It fails only when
// ctx ends.
func (t *tracker) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		t.mu.Lock()
		if cond() {
			t.mu.Unlock()
			return nil
		}
		if t.moved == nil {
			t.moved = make(chan struct{})
		}
		ch := t.moved
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// held reports whether a batch with failures stopped the acknowledged
// prefix (or the tracker started held).
func (t *tracker) held() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stuck
}

// heldHere reports whether a batch of this tracker's run stopped the
// acknowledged prefix (held, not inherited).
func (t *tracker) heldHere() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stuck && !t.inherited
}

func (t *tracker) through() Seq {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.thru
}

// throughTail is through and the last revision of the acknowledged
// prefix (nil when none is known).
func (t *tracker) throughTail() (Seq, *anchor) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.thru, t.tail
}

// readThrough is the seq up to which every batch is finished, failed
// or not.
func (t *tracker) readThrough() Seq {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.read
}

// docsWritten records that batch n's revisions other than its held
// design documents are written (or that it ended without writing them);
// calling it again is harmless.
func (t *tracker) docsWritten(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.working[n] {
		delete(t.working, n)
		t.signal()
	}
}

// othersWritten reports, without waiting, that no batch but n is cut
// with revisions not yet written.
func (t *tracker) othersWritten(n int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for m := range t.working {
		if m != n {
			return false
		}
	}
	return true
}

// waitOthers waits until every batch but n cut when it is called has
// its revisions other than held design documents written. It fails only
// when ctx ends. Those batches never wait for n's design documents, and
// n's wait is off the workers (writeHeld), so this cannot wait for ever.
func (t *tracker) waitOthers(ctx context.Context, n int64) error {
	t.mu.Lock()
	var wait []int64
	for m := range t.working {
		if m != n {
			wait = append(wait, m)
		}
	}
	t.mu.Unlock()
	return t.waitUntil(ctx, func() bool {
		for _, m := range wait {
			if t.working[m] {
				return false
			}
		}
		return true
	})
}
