package replicate

import (
	"context"
	"sync"
)

// tracker keeps the seq up to which every batch is acknowledged: the
// longest finished prefix of batch numbers. A batch in which some
// revision was not copied stops the prefix for the rest of the run, so
// that a later run reads those changes again and retries them.
type tracker struct {
	mu     sync.Mutex
	seqs   map[int64]Seq
	fin    map[int64]bool
	failed map[int64]bool
	next   int64
	thru   Seq
	stuck  bool
	// moved, when not nil, is closed when the prefix moves or sticks
	// (waitPrefix).
	moved chan struct{}
}

func newTracker() *tracker {
	return &tracker{seqs: map[int64]Seq{}, fin: map[int64]bool{}, failed: map[int64]bool{}}
}

func (t *tracker) started(n int64, seq Seq) {
	t.mu.Lock()
	if !t.stuck {
		t.seqs[n] = seq
	}
	t.mu.Unlock()
}

func (t *tracker) done(n int64, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stuck {
		// The prefix never moves again: nothing more to remember (a
		// continuous run goes on for days after a failure).
		return
	}
	t.fin[n] = true
	if failed {
		t.failed[n] = true
	}
	defer t.signal()
	for !t.stuck && t.fin[t.next] {
		if t.failed[t.next] {
			t.stuck = true
			clear(t.seqs)
			clear(t.fin)
			clear(t.failed)
			break
		}
		if s := t.seqs[t.next]; len(s) > 0 {
			t.thru = s
		}
		delete(t.fin, t.next)
		delete(t.seqs, t.next)
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
	return t.next >= n || t.stuck
}

// waitPrefix waits until every batch numbered below n is done, or a
// batch with failures stopped the prefix (those revisions are reported;
// waiting longer would wait for ever). It fails only when ctx ends.
func (t *tracker) waitPrefix(ctx context.Context, n int64) error {
	for {
		t.mu.Lock()
		if t.next >= n || t.stuck {
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

// held reports whether a batch with failures stopped the prefix.
func (t *tracker) held() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stuck
}

func (t *tracker) through() Seq {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.thru
}
