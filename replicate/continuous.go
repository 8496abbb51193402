package replicate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Follower is the Source ability continuous runs need: a changes feed
// that does not end at the last change (couch.DB: `feed=continuous`).
type Follower interface {
	// Follow reads `_changes?style=all_docs` from since (exclusive) on one
	// connection, calling fn for every row as it arrives, and waits for
	// more: it returns only when the connection ends (ctx.Err() when ctx
	// is cancelled, otherwise an error saying why; an error from fn is
	// returned as is). It does not retry: the engine reconnects from the
	// last row's seq.
	Follow(ctx context.Context, since Seq, o FollowOptions, fn func(Change) error) error
}

// FollowOptions tune one Follow connection.
type FollowOptions struct {
	// Heartbeat is the `heartbeat` asked of the server; a connection
	// silent for a few heartbeats is taken as dead. Zero: DefaultHeartbeat.
	Heartbeat time.Duration
	// Docs asks for the rows' documents (`include_docs`) where that
	// spares a `_bulk_get` (see Change.Docs).
	Docs bool
	// Connected, when not nil, is called once the server has answered
	// the feed's request (its status and headers), before any row.
	Connected func()
}

// ErrNotFollowable is returned by Run when Options.Continuous is set and
// the source cannot follow its changes (an archive).
var ErrNotFollowable = errors.New("the source cannot follow its changes feed (continuous replication needs a CouchDB or PouchDB Server database)")

// Reconnect backoff of a continuous run's feed: the first wait after a
// failure, doubled at each further failure without a row, up to the cap.
const (
	reconnectFirst = 1 * time.Second
	reconnectMax   = 30 * time.Second
)

// feedRow is a changes row with the time it arrived from the feed.
type feedRow struct {
	c  Change
	at time.Time
}

// feedLoop follows the source from since, sending each row to rows, and
// reconnects with backoff whenever the feed fails, from the last row read,
// until ctx is done, or the source refuses the feed for lack of rights
// (ErrDenied: returned).
func (r *run) feedLoop(ctx context.Context, f Follower, since Seq, rows chan<- feedRow) error {
	last := since
	failures := 0
	var lostAt time.Time // when the feed was lost, until it answers again
	attempts := 0
	back := func() {
		if !lostAt.IsZero() {
			n := "attempts"
			if attempts == 1 {
				n = "attempt"
			}
			r.logf("feed back after %s (%d reconnect %s)", time.Since(lostAt).Round(100*time.Millisecond), attempts, n)
			lostAt, attempts = time.Time{}, 0
		}
	}
	var lastMu sync.Mutex // last, read by watchSeq meanwhile
	for {
		got := 0
		cctx, stop := r.watchSeq(ctx, func() Seq { lastMu.Lock(); defer lastMu.Unlock(); return last })
		err := f.Follow(cctx, last, FollowOptions{Heartbeat: r.opts.Heartbeat, Docs: true, Connected: back}, func(c Change) error {
			back() // a Follower that does not call Connected
			select {
			case rows <- feedRow{c: c, at: time.Now()}:
			case <-cctx.Done():
				return cctx.Err()
			}
			if len(c.Seq) > 0 {
				lastMu.Lock()
				last = c.Seq
				lastMu.Unlock()
			}
			got++
			return nil
		})
		stop()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if cause := context.Cause(cctx); errors.Is(cause, errSeqBehind) {
			err = cause
		}
		if err == nil {
			err = errors.New("the feed ended")
		}
		if errors.Is(err, ErrDenied) {
			// A changed password or a removed member: every reconnect
			// would be one more failed login (CouchDB locks the account).
			return fmt.Errorf("source: changes feed: %w (not retried: stopping)", err)
		}
		if got > 0 {
			failures = 0
		}
		failures++
		if lostAt.IsZero() {
			lostAt = time.Now()
		}
		attempts++
		wait := reconnectWait(failures)
		r.logf("feed lost: %v; reconnecting in %s", err, wait.Round(100*time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		r.opts.Observer.Reconnected(err)
		for {
			recreated, missing := r.recreatedWhileFollowed(ctx, last)
			if recreated {
				r.warn("the source database was deleted and created again while followed: its changes are read again from the beginning" + keptNote)
				last = nil
				failures = 0
			}
			if !missing {
				break
			}
			// Deleted: no feed until it exists again, and then it is
			// judged before it is followed from the old one's seq.
			failures++
			t := time.NewTimer(reconnectWait(failures))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
}

// errSeqBehind ends a feed whose source's update_seq fell below the seq
// the run reached (see watchSeq).
var errSeqBehind = errors.New("the source's update_seq is below the seq reached (the database deleted and created again?)")

// seqCheckHeartbeats is how many heartbeats apart watchSeq asks the
// source's update_seq: about 8 minutes at DefaultHeartbeat, so that an
// idle source is asked almost nothing.
const seqCheckHeartbeats = 50

// watchSeq returns ctx for one connection of the feed, cancelled with
// errSeqBehind when the source's update_seq, asked every
// seqCheckHeartbeats heartbeats, falls below last() (integer seqs only).
// PouchDB Server keeps the feed of a deleted database open, and answers
// the feed of the database created again in its place from the old seq
// with nothing: only its update_seq tells. stop ends the watch.
func (r *run) watchSeq(ctx context.Context, last func() Seq) (cctx context.Context, stop func()) {
	if !integerSeq(last()) {
		return ctx, func() {}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(seqCheckHeartbeats * r.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-cctx.Done():
				return
			case <-t.C:
				if info, err := r.src.Info(cctx); err == nil && seqAhead(last(), info.UpdateSeq) {
					cancel(errSeqBehind)
					return
				}
			}
		}
	}()
	// stop returns once the watch has ended: last is not read after it
	return cctx, func() { close(done); cancel(nil); <-exited }
}

// recreatedWhileFollowed reports whether the source database, whose feed
// was lost (a deleted database ends it), is another one now: an integer
// seq the run had reached is ahead of its update_seq (PouchDB Server,
// whose new database's seqs start again from 0: following on from the
// old one's would skip its first changes), or the revisions of the run's
// anchor and of its last checkpoint are gone. missing: the database does
// not exist (deleted, not created again yet). A source that cannot be
// asked (unreachable) is not judged; the next reconnect asks again. When
// it is another, the run's anchor and tail are dropped for the new
// database's.
func (r *run) recreatedWhileFollowed(ctx context.Context, last Seq) (recreated, missing bool) {
	if r.cp == nil {
		return false, false
	}
	info, err := r.src.Info(ctx)
	if errors.Is(err, ErrNotFound) {
		return false, true
	}
	if err != nil {
		return false, false
	}
	if !integerSeq(last) || !seqAhead(last, info.UpdateSeq) {
		a, err := anchorGone(ctx, r.src, r.cp.getAnchor(), r.cp.getTail())
		if err != nil || a == nil {
			return false, false
		}
	}
	r.cp.anchorMu.Lock()
	r.cp.anchor, r.cp.tail = nil, nil
	r.cp.anchorMu.Unlock()
	return true, false
}

// reconnectWait is the wait before reconnect attempt n (1-based): 1 s,
// 2 s, 4 s... up to 30 s, with up to a quarter more at random so that
// many followers of one server do not come back at once.
func reconnectWait(n int) time.Duration {
	d := reconnectFirst
	for i := 1; i < n && d < reconnectMax; i++ {
		d *= 2
	}
	d = min(d, reconnectMax)
	return d + time.Duration(rand.Int64N(int64(d/4)+1))
}

// follow is the continuous phase of readChanges: rows from the feed are
// cut into batches at BatchSize rows, WriteBatchBytes of documents, or
// FlushInterval after the batch's first row.
func (r *run) follow(ctx context.Context, since Seq, k *cutter) error {
	f, ok := r.src.(Follower)
	if !ok {
		return ErrNotFollowable
	}
	r.liveDocs.Store(true)
	// Rows from here on are mostly edits of documents the target holds:
	// _revs_diff is asked again (an initial copy into an empty target
	// learnt to skip it), so that an edited document's unchanged
	// attachments come as stubs (atts_since: its possible_ancestors) and
	// missing_found counts what the target lacks.
	r.diff.init(0)
	rows := make(chan feedRow, r.opts.BatchSize)
	feedErr := make(chan error, 1)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { feedErr <- r.feedLoop(fctx, f, since, rows) }()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	flush := func() error {
		if armed {
			timer.Stop()
			armed = false
		}
		return k.send(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-feedErr:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("source: %w", err)
		case fr := <-rows:
			full := k.add(fr.c, fr.at)
			if full || (r.opts.FlushInterval < 0 && len(rows) == 0) {
				if err := flush(); err != nil {
					return err
				}
				continue
			}
			if !armed {
				// From the row's arrival on the feed: a row that waited
				// in the channel while the workers were busy has already
				// used part of its interval.
				timer.Reset(max(0, r.opts.FlushInterval-time.Since(fr.at)))
				armed = true
			}
		case <-timer.C:
			armed = false
			// Rows already waiting join the batch (up to its size):
			// behind a busy target the timer fires at once, and the
			// batches must not shrink to a row or two.
			for len(rows) > 0 {
				fr := <-rows
				if k.add(fr.c, fr.at) {
					break
				}
			}
			if err := k.send(ctx); err != nil {
				return err
			}
		}
	}
}

func (r *run) logf(format string, args ...any) {
	if r.opts.Log != nil {
		r.opts.Log(fmt.Sprintf(format, args...))
	}
}
