package replicate

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	ctxwait "github.com/sofadb/sofa/internal/wait"
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
// A batch whose design documents must wait (see writeBuf) hands them to
// spawn, which runs writeHeld off the worker and reports the batch after
// it.
func (r *run) runBatch(ctx context.Context, b *batch, tr *tracker, spawn func(func() error)) error {
	if err := r.pace(ctx, nil); err != nil {
		return err
	}
	defer tr.docsWritten(b.n)
	for attempt := 1; ; attempt++ {
		acct := &batchAcct{}
		actx := context.WithValue(ctx, batchFailedKey{}, acct)
		held, err := r.process(actx, b, tr)
		if err == nil && len(held) > 0 {
			tr.docsWritten(b.n)
			spawn(func() error {
				if err := r.writeHeld(actx, b.n, tr, held); err != nil {
					return err
				}
				r.batchDone(b, tr, acct)
				return nil
			})
			return nil
		}
		if err == nil {
			r.batchDone(b, tr, acct)
			return nil
		}
		if !r.retries(ctx, err, attempt) {
			return err
		}
		// The documents the feed delivered had their bytes released
		// when their write was sent: the retry reads them again.
		for i := range b.changes {
			b.changes[i].Docs = nil
		}
		if err := r.backoff(ctx, attempt, fmt.Sprintf("a batch of %d changes", len(b.changes)), err); err != nil {
			return err
		}
	}
}

// batchDone reports batch b finished: to the tracker, the Observer and
// the liveness watch.
func (r *run) batchDone(b *batch, tr *tracker, acct *batchAcct) {
	tr.done(b.n, acct.failed.Load())
	r.c.batches.Add(1)
	r.opts.Observer.BatchWritten(int(acct.written.Load()), int(acct.failures.Load()), time.Since(b.first))
	r.live.done(b.n)
	if n := acct.failures.Load(); n > 0 && r.opts.Continuous {
		r.logf("%d revisions not copied (doc_write_failures, listed at the end); the checkpoint stays before them, so a restart tries them again", n)
	}
}

// writeHeld writes batch n's held design documents once every batch
// before n is finished and every other batch cut by then has its other
// revisions written. It runs off the workers: the batches it waits for
// need one (with one worker, waiting on it would wait for ever). A
// continuous run tries the write again as runBatch does.
func (r *run) writeHeld(ctx context.Context, n int64, tr *tracker, held []*Doc) error {
	if err := tr.waitPrefix(ctx, n); err != nil {
		return err
	}
	if err := tr.waitOthers(ctx, n); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		dctx, done := drain(ctx, interruptGrace)
		err := r.write(dctx, held)
		done()
		if err == nil {
			return nil
		}
		if !r.retries(ctx, err, attempt) {
			return err
		}
		if err := r.backoff(ctx, attempt, fmt.Sprintf("a write of %d design documents", len(held)), err); err != nil {
			return err
		}
	}
}

// retries says whether a failed attempt of a batch is tried again: in a
// continuous run, up to maxBatchAttempts, but for ErrDenied.
func (r *run) retries(ctx context.Context, err error, attempt int) bool {
	return r.opts.Continuous && ctx.Err() == nil && attempt < maxBatchAttempts && !errors.Is(err, ErrDenied)
}

// backoff logs a failed attempt of what and waits before the next one.
func (r *run) backoff(ctx context.Context, attempt int, what string, err error) error {
	wait := reconnectWait(attempt)
	r.logf("%s failed: %v; retrying in %s", what, err, wait.Round(100*time.Millisecond))
	return ctxwait.Sleep(ctx, wait)
}
