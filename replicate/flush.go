package replicate

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// cutter cuts the changes rows into numbered batches for the workers:
// the catch-up feed at the batch size, a continuous feed also on the
// flush timer (see follow).
type cutter struct {
	r     *run
	out   chan<- *batch
	tr    *tracker
	rows  int  // rows per batch
	start bool // the feed starts from the beginning: its first row of a short id is the anchor
	n     int64
	cur   *batch
	bytes int64 // document bytes delivered with the rows of cur
	last  Seq   // seq of the last row read that had one
}

// add appends a row read at time at; it reports whether the batch is full
// (BatchSize rows, or WriteBatchBytes of documents delivered with them).
func (k *cutter) add(c Change, at time.Time) bool {
	if k.start && len(c.Revs) > 0 && len(c.ID) <= maxAnchorID {
		k.r.cp.setAnchor(&anchor{ID: c.ID, Rev: c.Revs[0]})
		k.start = false
	}
	k.r.c.changesRead.Add(1)
	if k.cur == nil {
		k.cur = &batch{first: at}
		k.bytes = 0
		k.r.live.holding(at)
	}
	k.cur.changes = append(k.cur.changes, c)
	if len(c.Seq) > 0 {
		k.cur.seq = c.Seq
		k.last = c.Seq
	}
	for _, d := range c.Docs {
		k.bytes += d.Size()
	}
	return len(k.cur.changes) >= k.rows || (c.Docs != nil && k.bytes >= k.r.opts.WriteBatchBytes)
}

// retried cuts the revisions an earlier pass could not copy (a
// Session's retry) into the first batches, ahead of the feed read from
// since: the last carries since, so that once they are written every
// change up to it is acknowledged.
func (k *cutter) retried(ctx context.Context, retry []Change, since Seq) error {
	if len(retry) == 0 {
		return nil
	}
	start := k.start
	k.start = false // the anchor is the feed's first row
	defer func() { k.start = start }()
	for i, c := range retry {
		c.Seq = nil
		if i == len(retry)-1 {
			c.Seq = since
		}
		if k.add(c, time.Now()) {
			if err := k.send(ctx); err != nil {
				return err
			}
		}
	}
	return k.send(ctx)
}

// tailOf is the last revision of changes fit for a checkpoint (an id of
// at most maxAnchorID bytes), nil when none is.
func tailOf(changes []Change) *anchor {
	for i := len(changes) - 1; i >= 0; i-- {
		if c := changes[i]; len(c.Revs) > 0 && len(c.ID) <= maxAnchorID {
			return &anchor{ID: c.ID, Rev: c.Revs[0]}
		}
	}
	return nil
}

// send hands the batch being cut, if any, to the workers.
func (k *cutter) send(ctx context.Context) error {
	b := k.cur
	if b == nil || len(b.changes) == 0 {
		return nil
	}
	k.cur = nil
	b.n = k.n
	k.n++
	k.tr.started(b.n, b.seq, tailOf(b.changes))
	k.r.live.started(b.n, b.first)
	k.r.opts.Observer.ChangesSeen(len(b.changes), k.r.pending())
	if k.bytes > 0 {
		b.carries = true
		select {
		case k.r.carried <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case k.out <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pending is the feed's last `pending` count when the source reports it,
// -1 otherwise.
func (r *run) pending() int64 {
	if p, ok := r.src.(interface{ Pending() int64 }); ok {
		return p.Pending()
	}
	return -1
}

// batchAcct counts what one batch did, for the Observer and the
// checkpoint (a batch with failures holds the checkpoint back).
type batchAcct struct {
	failed   atomic.Bool
	written  atomic.Int64
	failures atomic.Int64
}

// wrote counts n revisions accepted by the target.
func (r *run) wrote(ctx context.Context, n int64) {
	r.c.docsWritten.Add(n)
	if a, ok := ctx.Value(batchFailedKey{}).(*batchAcct); ok {
		a.written.Add(n)
	}
}

// pace waits while a Pacer target asks to (see Pacer); release, when not
// nil, writes what the worker holds before it waits.
func (r *run) pace(ctx context.Context, release func() error) error {
	p, ok := r.tgt.(Pacer)
	if !ok {
		return nil
	}
	if release == nil {
		release = func() error { return nil }
	}
	return p.Pace(ctx, release)
}

// maxBatchAttempts bounds the tries of one batch in a continuous run
// (each request is itself retried by the client for minutes).
const maxBatchAttempts = 8

// runBatch copies one batch and reports it; in a continuous run a batch
// that fails (target or source unreachable beyond the client's own
// retries) is tried again after a backoff, since writes are idempotent,
// but for a refusal for lack of rights (ErrDenied), which stops the run.
func (r *run) runBatch(ctx context.Context, b *batch, tr *tracker) error {
	if err := r.pace(ctx, nil); err != nil {
		return err
	}
	tr.picked(b.n)
	defer tr.docsWritten(b.n)
	for attempt := 1; ; attempt++ {
		acct := &batchAcct{}
		err := r.process(context.WithValue(ctx, batchFailedKey{}, acct), b, tr)
		if err == nil {
			tr.done(b.n, acct.failed.Load())
			r.c.batches.Add(1)
			r.opts.Observer.BatchWritten(int(acct.written.Load()), int(acct.failures.Load()), time.Since(b.first))
			r.live.done(b.n)
			if n := acct.failures.Load(); n > 0 && r.opts.Continuous {
				r.logf("%d revisions not copied (doc_write_failures, listed at the end); the checkpoint stays before them, so a restart tries them again", n)
			}
			return nil
		}
		if !r.opts.Continuous || ctx.Err() != nil || attempt >= maxBatchAttempts || errors.Is(err, ErrDenied) {
			return err
		}
		// The documents the feed delivered had their bytes released
		// when their write was sent: the retry reads them again.
		for i := range b.changes {
			b.changes[i].Docs = nil
		}
		wait := reconnectWait(attempt)
		r.logf("a batch of %d changes failed: %v; retrying in %s", len(b.changes), err, wait.Round(100*time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
