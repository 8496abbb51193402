package replicate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// Result is the outcome of one replication.
type Result struct {
	ReplicationID string        `json:"replication_id"`
	StartSeq      Seq           `json:"-"`
	EndSeq        Seq           `json:"-"` // the seq checkpointed (all changes up to it copied; with NoCheckpoints the seq reached, not recorded)
	Stats         Stats         `json:"stats"`
	Failures      []DocError    `json:"failures,omitempty"` // revisions not copied, with reasons
	Warnings      []string      `json:"warnings,omitempty"`
	Duration      time.Duration `json:"-"`
	// TargetOnlyCheckpoints: checkpoints were written to the target only,
	// because Options.SourceReadOnly asked so (the sofa package's default,
	// unless its SourceCheckpoints is set) or the source refused `_local`
	// writes.
	TargetOnlyCheckpoints bool `json:"target_only_checkpoints,omitempty"`
}

// StartSeqString and EndSeqString give the seqs as text for summaries.
func (r *Result) StartSeqString() string { return r.StartSeq.String() }
func (r *Result) EndSeqString() string   { return r.EndSeq.String() }

// batch is a run of changes rows handed to one worker.
type batch struct {
	n       int64
	changes []Change
	seq     Seq       // seq of the last row that had one
	first   time.Time // arrival of the first row from the feed (lag)
	// carries: the rows hold their documents (an archive source, an
	// inline feed); the batch then holds a slot of run.carried while it
	// waits for a worker.
	carries bool
}

type run struct {
	src   Source
	tgt   Target
	opts  Options
	c     *Counters
	mem   *semaphore.Weighted
	fails failureList
	diff  diffSkipper
	// localDiff: the target's RevsDiff costs no request (LocalDiffer)
	localDiff bool
	size      sizeEstimator
	cp        *checkpointer
	mark      *marker // Options.Unclaimed: the mark owed (mark.go)
	live      *liveness
	// carried holds a slot for the one batch carrying its documents
	// that may wait for a worker (see pipeline).
	carried chan struct{}
	// initialCopy: no checkpoint and an empty target, so every revision
	// is missing and reading documents with the feed costs nothing extra.
	initialCopy bool
	// meta is the source's metadata when CopyMetadata (applied after
	// the documents: at the end, or once a continuous run caught up).
	meta Metadata
	// srcInfo is the source's info when the run started: the size of
	// an initial copy's feed, and of its documents (see batchRows).
	srcInfo DBInfo
	// passFeed: a Session's later pass, whose first rows are read with
	// their generation-1 documents inline where the source offers it
	// (see readChanges).
	passFeed bool
	// retry: the revisions a Session's earlier passes could not copy,
	// read again ahead of the feed (see Session.Pass).
	retry []Change
	// reread: documents replaced on the source while read (unreadable),
	// copied again once the feed's batches are done.
	reread rereads
	// liveDocs: rows are changes read as they happen (a continuous
	// run's feed, a later pass): a generation-1 revision delivered with
	// its row is written without asking _revs_diff (see process).
	liveDocs atomic.Bool

	mu       sync.Mutex
	warnings []string
	warned   map[string]bool
}

func (r *run) warn(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned[msg] {
		return
	}
	if r.warned == nil {
		r.warned = map[string]bool{}
	}
	r.warned[msg] = true
	r.warnings = append(r.warnings, msg)
	if r.opts.Warn != nil {
		r.opts.Warn(msg)
	}
}

func (r *run) debug(format string, args ...any) {
	if r.opts.Debug != nil {
		r.opts.Debug(format, args...)
	}
}

// Run replicates every leaf revision of src that tgt lacks, from the seq
// recorded in the last checkpoint both sides agree on, and checkpoints
// progress in `_local/<replication id>` on both (target only when the
// source refuses). It returns the result even on error; per-revision
// failures are in Result.Failures and do not make an error. On context
// cancellation it writes a checkpoint covering the acknowledged prefix and
// returns ctx.Err().
//
// Run is Open, one pass and its checkpoint: see Session for a replication
// kept open between passes.
func Run(ctx context.Context, src Source, tgt Target, opts Options) (*Result, error) {
	s, res, err := open(ctx, src, tgt, opts)
	if err != nil {
		return res, err
	}
	return s.pass(ctx, true)
}

// open does what a replication does before reading the changes feed: the
// databases' info, the replication id, the checkpoints read and judged,
// the metadata set before the documents. On error the Result says what
// was learnt (the replication id, warnings).
func open(ctx context.Context, src Source, tgt Target, opts Options) (*Session, *Result, error) {
	opts.defaults()
	if _, ok := src.(Follower); opts.Continuous && !ok {
		return nil, &Result{}, ErrNotFollowable
	}
	t0 := time.Now()
	r := &run{src: src, tgt: tgt, opts: opts, c: opts.Counters,
		mem: opts.Budget.sem}
	_, r.localDiff = tgt.(LocalDiffer)
	res := &Result{}
	s := &Session{r: r, t0: t0, first: true}
	fill := func() {
		res.Stats = r.c.Snapshot()
		res.Failures = r.fails.all()
		res.Warnings = r.warnings
		res.Duration = time.Since(t0)
	}

	var sinfo DBInfo
	var err error
	if opts.SourceInfo != nil {
		sinfo = *opts.SourceInfo
	} else if sinfo, err = src.Info(ctx); err != nil {
		fill()
		return nil, res, fmt.Errorf("source: %w", err)
	}
	var tinfo DBInfo
	if opts.TargetCreated != nil {
		tinfo = *opts.TargetCreated
	} else if opts.TargetInfo != nil {
		tinfo = *opts.TargetInfo
	} else if tinfo, err = tgt.Info(ctx); err != nil {
		fill()
		return nil, res, fmt.Errorf("target: %w", err)
	}
	res.ReplicationID = ReplicationID(sinfo.Identity, tinfo.Identity, opts.ContentOptions...)
	r.srcInfo = sinfo
	r.size.seed(sinfo)
	cp := &checkpointer{id: res.ReplicationID, session: newSessionID(), startTime: t0,
		source: src, target: tgt, srcInst: sinfo.InstanceStart, tgtInst: tinfo.InstanceStart, warn: r.warn,
		srcOff: opts.SourceReadOnly}
	r.cp = cp
	var since Seq
	// The target's checkpoint is read first: without it the copy starts
	// from the beginning whatever the source holds, so the source's is
	// only read when there is something to compare (a stale source
	// checkpoint is then overwritten through a 409 and a re-read). A
	// target the caller has just created holds none.
	if !opts.NoCheckpoints && opts.TargetCreated == nil {
		if opts.TargetCheckpoint != nil && opts.TargetCheckpoint.ID == cp.id {
			cp.tgtLog = parseCheckpoint(opts.TargetCheckpoint.Body)
		} else if cp.tgtLog, err = readCheckpoint(ctx, tgt, cp.id); err != nil {
			fill()
			return nil, res, fmt.Errorf("target: read checkpoint: %w", err)
		}
		if cp.tgtLog != nil && !(opts.SourceReadOnly && cp.tgtLog.TargetOnly) {
			if cp.srcLog, err = readCheckpoint(ctx, src, cp.id); err != nil {
				fill()
				return nil, res, fmt.Errorf("source: read checkpoint: %w", err)
			}
		}
		if since, err = r.trustedSince(ctx, cp, sinfo, tinfo); err != nil {
			fill()
			return nil, res, err
		}
	}
	if opts.Unclaimed && !opts.NoCheckpoints {
		r.mark = &marker{needed: cp.tgtLog == nil}
	}
	cp.startSeq = since
	if st, ok := tgt.(StartSeqSetter); ok {
		st.SetStartSeq(since)
	}
	s.since = since
	s.id = res.ReplicationID
	// An empty target with no checkpoint lacks everything: skip
	// _revs_diff until the estimate says otherwise.
	if len(since) == 0 && tinfo.DocCount+tinfo.DelCount == 0 {
		r.diff.init(1)
		r.initialCopy = true
		if opts.TargetCreated != nil && !opts.Continuous {
			r.diff.skipAlways()
		}
	}

	if opts.CopyMetadata {
		meta := Metadata{}
		if opts.SourceMetadata != nil {
			meta = *opts.SourceMetadata
		} else if meta, err = src.Metadata(ctx); err != nil {
			fill()
			return nil, res, fmt.Errorf("source: %w", err)
		}
		if err := tgt.SetMetadata(ctx, meta, BeforeDocs); errors.Is(err, ErrMetadataRefused) {
			r.warn("target: " + err.Error())
		} else if err != nil {
			fill()
			return nil, res, fmt.Errorf("target: %w", err)
		}
		r.meta = meta
	}
	return s, res, nil
}

// trustedSince returns the checkpointed seq unless a database was
// recreated since the checkpoint (instance_start_time changed, an integer
// seq gone back, the anchor revision gone): then nil, the copy starting
// over with a warning, or, for the source database with
// Options.StopIfSourceRecreated, an error matching ErrSourceRecreated.
func (r *run) trustedSince(ctx context.Context, cp *checkpointer, sinfo, tinfo DBInfo) (Seq, error) {
	since := compareCheckpoints(cp.srcLog, cp.tgtLog)
	if since == nil && cp.srcLog == nil && cp.tgtLog != nil && cp.tgtLog.SessionID != "" && cp.tgtLog.TargetOnly {
		// Target-only checkpoints (read-only source): trust the target's
		// log when its instance fields match. A log written while the
		// source took checkpoints is not trusted alone: the source's copy
		// is gone, so the source database may be a new one.
		since = Seq(cp.tgtLog.SourceLastSeq)
	}
	if since == nil {
		return nil, nil
	}
	// recreated starts over from the beginning: the source database is
	// another one than the checkpoint's (why says how it shows).
	recreated := func(warning, why string) (Seq, error) {
		if r.opts.StopIfSourceRecreated {
			return nil, &recreatedError{why: why}
		}
		if _, archive := r.tgt.(StartSeqSetter); !archive {
			warning += keptNote // an archive holds what this run reads
		}
		r.warn(warning)
		return nil, nil
	}
	log := cp.tgtLog
	if log != nil && changedInstance(log.SourceInstance, sinfo.InstanceStart) {
		if r.opts.StopIfSourceRecreated && r.sameSourceDB(ctx, since, sinfo, log) {
			// PouchDB Server's instance_start_time is its process's
			// start: restarted, not recreated. Read again from the
			// beginning, as without StopIfSourceRecreated.
			r.warn("the source's instance_start_time changed since the last checkpoint, but it still holds the revision it held at the first run (a server restarted, not a database recreated): reading it again from the beginning")
			return nil, nil
		}
		return recreated("a database was recreated since the last checkpoint: "+StartOverNote, "its instance_start_time changed")
	}
	if log != nil && changedInstance(log.TargetInstance, tinfo.InstanceStart) {
		r.warn("a database was recreated since the last checkpoint: " + StartOverNote + keptNote)
		return nil, nil
	}
	if seqAhead(since, sinfo.UpdateSeq) {
		return recreated("the checkpoint is ahead of the source's update_seq (database recreated?): "+StartOverNote,
			"the checkpoint is ahead of its update_seq")
	}
	// Even where instance_start_time names a database's creation
	// (CouchDB 3.3+), it is in seconds: a database recreated within one
	// keeps it. A revision gone may also have been purged or stemmed;
	// starting over then costs a rescan, never a document.
	if log != nil && (log.Anchor != nil || log.Tail != nil) {
		gone, err := anchorGone(ctx, r.src, log.Anchor, log.Tail)
		if err != nil {
			r.warn("could not check that the source database is the one checkpointed: " + err.Error())
		} else if gone != nil {
			when := "at the first run"
			if gone == log.Tail {
				when = "at the last checkpoint"
			}
			return recreated(fmt.Sprintf("the source no longer knows revision %s of %q that it held %s: the database was recreated (or that revision was purged, or stemmed by its _revs_limit); "+StartOverNote, gone.Rev, gone.ID, when),
				fmt.Sprintf("it no longer knows revision %s of %q, which it held %s", gone.Rev, gone.ID, when))
		}
	}
	if log != nil {
		if log.Anchor != nil {
			cp.setAnchor(log.Anchor)
		}
		cp.setTail(log.Tail)
	}
	return since, nil
}

// ErrSourceRecreated is the error of Open and Run with
// Options.StopIfSourceRecreated when the target's checkpoint shows that
// the source database was deleted and created again since it was
// written (another instance_start_time, a checkpoint ahead of an integer
// update_seq, or the anchor revision of the first run gone).
var ErrSourceRecreated = errors.New("the source database was deleted and created again since the last checkpoint")

// recreatedError is ErrSourceRecreated with how it showed.
type recreatedError struct{ why string }

func (e *recreatedError) Error() string { return ErrSourceRecreated.Error() + " (" + e.why + ")" }
func (e *recreatedError) Unwrap() error { return ErrSourceRecreated }

// sameSourceDB reports whether a source whose instance_start_time changed
// since the checkpoint log is still the database checkpointed, as far as
// integer seqs tell (PouchDB Server, whose instance_start_time is its
// process's start): the checkpoint not ahead of the update_seq and the
// anchor revision of the first run still known. A clustered seq (CouchDB,
// whose instance_start_time is the database's creation) says nothing.
func (r *run) sameSourceDB(ctx context.Context, since Seq, sinfo DBInfo, log *checkpointDoc) bool {
	if !integerSeq(since) || log.Anchor == nil || seqAhead(since, sinfo.UpdateSeq) {
		return false
	}
	gone, err := anchorGone(ctx, r.src, log.Anchor, log.Tail)
	return err == nil && gone == nil
}

// changedInstance: two instance_start_times, both known, differ.
func changedInstance(old, now string) bool {
	return old != "" && now != "" && old != "0" && now != "0" && old != now
}

// StartOverNote is in every warning of a run that found its checkpoint
// does not fit the source and read it from the beginning (for a backup:
// in full, not as an incremental).
const StartOverNote = "starting over from the beginning"

// keptNote ends the warnings about a recreated database: replication
// only adds revisions, so what the target got from the old one stays.
const keptNote = " (documents the target got from the old database stay there; replication never deletes)"

// anchorGone asks the source (when it can answer _revs_diff), in one
// request, whether it still knows the revisions as (nil ones skipped):
// the first it does not know, nil when it knows them all.
func anchorGone(ctx context.Context, src Source, as ...*anchor) (*anchor, error) {
	rd, ok := src.(interface {
		RevsDiff(context.Context, map[string][]string) (map[string]Missing, error)
	})
	if !ok {
		return nil, nil
	}
	ask := map[string][]string{}
	for _, a := range as {
		if a != nil && !contains(ask[a.ID], a.Rev) {
			ask[a.ID] = append(ask[a.ID], a.Rev)
		}
	}
	if len(ask) == 0 {
		return nil, nil
	}
	m, err := rd.RevsDiff(ctx, ask)
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if a != nil && contains(m[a.ID].Missing, a.Rev) {
			return a, nil
		}
	}
	return nil, nil
}

// seqAhead reports whether checkpoint seq cp is beyond the source's
// current update_seq. Only integer seqs (PouchDB Server, CouchDB 1.x)
// are compared; clustered seqs are opaque and never judged ahead.
func seqAhead(cp, cur Seq) bool {
	a, err1 := strconv.ParseInt(string(cp), 10, 64)
	b, err2 := strconv.ParseInt(string(cur), 10, 64)
	return err1 == nil && err2 == nil && a > b
}

// pipeline runs the changes reader, the workers and the checkpointer
// from since, tr tracking the acknowledged batches. It returns the seq
// covered by the last checkpoint written. final writes a last checkpoint
// at the end (Run); without it one is written only when ctx is cancelled
// (a Session's pass: the caller checkpoints).
func (r *run) pipeline(ctx context.Context, since Seq, cp *checkpointer, tr *tracker, final bool) (Seq, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan *batch, r.opts.Workers)
	// A batch whose rows carry their documents holds their bytes outside
	// the in-flight budget until a worker takes it: one such batch waits
	// at a time (besides the one being cut). Reading an archive is far
	// faster than writing to a server, so a deeper queue only held more
	// memory: restoring 100,000 x 1 KiB into CouchDB with 8 workers peaked
	// at 60-64 MiB with 8 batches queued, 52-53 MiB with 1, as fast.
	r.carried = make(chan struct{}, 1)
	r.live = newLiveness(&r.opts, func(f string, a ...any) { r.logf(f, a...) })
	go r.live.watch()
	defer r.live.close()
	if r.opts.Continuous {
		// A target that stops answering is retried by its client for
		// minutes, silently: the log says when it is lost and back.
		defer r.watchTarget()()
	}
	g, gctx := errgroup.WithContext(wctx)
	g.Go(func() error {
		defer close(batches)
		return r.readChanges(gctx, since, batches, tr)
	})
	for i := 0; i < r.opts.Workers; i++ {
		g.Go(func() error {
			for b := range batches {
				if b.carries {
					<-r.carried
				}
				if err := r.runBatch(gctx, b, tr, g.Go); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// Periodic checkpoints while the workers run. They use wctx, not
	// gctx: errgroup cancels gctx as soon as Wait returns, which would
	// break a checkpoint write in progress at the end of a good run.
	stop := make(chan struct{})
	var cpErr error
	var cpWG sync.WaitGroup
	cpWG.Add(1)
	go func() {
		defer cpWG.Done()
		t := time.NewTicker(r.opts.CheckpointInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := r.checkpoint(wctx, cp, tr); err != nil {
					if r.opts.Continuous && wctx.Err() == nil && !errors.Is(err, ErrDenied) {
						// A continuous run outlives a target that is
						// away for a while: the next tick tries again
						// (not a refusal for lack of rights: it stops).
						r.logf("checkpoint failed: %v; trying again in %s", err, r.opts.CheckpointInterval)
						continue
					}
					cpErr = err
					cancel()
					return
				}
			}
		}
	}()
	err := g.Wait()
	close(stop)
	cpWG.Wait()
	if cpErr != nil && (err == nil || errors.Is(err, context.Canceled) && ctx.Err() == nil) {
		// the failed checkpoint cancelled the workers: its error, not
		// theirs, is why the run stopped
		err = cpErr
	}
	// Final checkpoint: all acknowledged batches, with a fresh context
	// when interrupted so an interrupted run keeps its progress.
	fctx := ctx
	if ctx.Err() != nil || err != nil {
		var c2 context.CancelFunc
		fctx, c2 = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer c2()
	}
	var lostCP error // the final checkpoint of an interrupted run, not written
	if r.lightEnd(ctx, r.c.batches.Load(), err, tr) {
		r.debug("no checkpoint at the end: one batch, copied in one write")
	} else if !r.opts.NoCheckpoints && (final || ctx.Err() != nil) {
		if cerr := r.checkpoint(fctx, cp, tr); cerr != nil && err == nil {
			err = cerr
		} else if cerr != nil && ctx.Err() != nil {
			lostCP = cerr
		}
	}
	if err == nil && ctx.Err() == nil {
		err = r.markUnwritten(ctx)
	}
	if !r.opts.NoCheckpoints {
		if tr.heldHere() {
			r.warn(WarnCheckpointHeld)
		}
	}
	cp.mu.Lock()
	last := cp.lastSeq
	cp.mu.Unlock()
	if s, _ := tr.throughTail(); r.opts.NoCheckpoints && len(s) > 0 {
		last = s // no checkpoint moves: the seq every write covers
	}
	if ctx.Err() != nil && lostCP != nil {
		return last, fmt.Errorf("%w: %w: %v", ctx.Err(), ErrFinalCheckpoint, lostCP)
	}
	if ctx.Err() != nil {
		return last, ctx.Err()
	}
	return last, err
}

// checkpoint records the seq tr has acknowledged, if it moved since the
// last checkpoint. Calls are serialized (a Session's pass and its
// caller's timer may both checkpoint): a checkpoint never goes back.
func (r *run) checkpoint(ctx context.Context, cp *checkpointer, tr *tracker) error {
	if r.opts.NoCheckpoints {
		return nil
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	seq, tail := tr.throughTail()
	if len(seq) == 0 || string(seq) == string(cp.lastSeq) {
		return nil
	}
	if m := r.mark; m != nil {
		// Not while a write carries the mark (both set cp.tgtLog); once
		// written, a checkpoint is the mark.
		m.mu.Lock()
		defer m.mu.Unlock()
	}
	if err := cp.write(ctx, seq, tail, r.c.Snapshot()); err != nil {
		return err
	}
	if r.mark != nil {
		r.mark.needed = false
	}
	r.c.checkpoints.Add(1)
	r.opts.Observer.Checkpointed(seq.String())
	r.debug("checkpoint at seq %s", seq.String())
	return nil
}

// readChanges cuts the feed into batches of BatchSize rows; a
// continuous run then follows the feed (see follow).
func (r *run) readChanges(ctx context.Context, since Seq, out chan<- *batch, tr *tracker) error {
	k := &cutter{r: r, out: out, tr: tr, rows: r.batchRows(), start: len(since) == 0, last: since}
	changes := r.src.Changes
	ws, inline := r.src.(docsFeed)
	switch {
	case inline && r.initialCopy && ws.InlineDocsFeed(r.srcInfo.DocCount+r.srcInfo.DelCount):
		changes = ws.ChangesWithDocs
	case inline && r.passFeed:
		changes = r.inlineFirst(ws)
	}
	if err := k.retried(ctx, r.retry, since); err != nil {
		return err
	}
	err := changes(ctx, since, func(c Change) error {
		if k.add(c, time.Now()) {
			return k.send(ctx)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("source: %w", err)
	}
	if err := k.send(ctx); err != nil {
		return err
	}
	if !r.opts.Continuous {
		// Documents replaced on the source while their batch read them:
		// their newer leaves, once every batch before is done (a few
		// rounds: they may be replaced again meanwhile).
		for round := 1; ; round++ {
			if err := tr.waitPrefix(ctx, k.n); err != nil {
				return err
			}
			rs := r.reread.take()
			if len(rs) == 0 {
				break
			}
			if round == 3 {
				r.reread.close() // replaced yet again: reported
			}
			if err := k.retried(ctx, rs, k.last); err != nil {
				return err
			}
		}
	}
	r.live.feedEnded()
	if !r.opts.Continuous {
		return nil
	}
	if r.opts.CopyMetadata {
		// A continuous run never ends on its own: `_security` is set
		// once the catch-up feed is read, and followed from then on.
		if err := r.tgt.SetMetadata(ctx, r.meta, AfterDocs); errors.Is(err, ErrMetadataRefused) {
			r.warn("target: " + err.Error())
		} else if err != nil {
			return fmt.Errorf("target: %w", err)
		}
		if r.opts.MetadataInterval > 0 {
			mctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.followMetadata(mctx, r.meta)
			}()
			defer func() { stop(); <-done }()
		}
	}
	return r.follow(ctx, k.last, k)
}

// errInlineDone stops the inline feed of a pass (see inlineFirst).
var errInlineDone = errors.New("inline rows read")

// inlineFirst is a later pass's feed: its rows with their documents
// inline (a new document needs no _bulk_get: a wake of a database with a
// few new documents reads the source once), as long as the inline feed is
// the cheaper way for the rows read so far (InlineDocsFeed); past that,
// the plain feed from the last row's seq.
func (r *run) inlineFirst(ws docsFeed) func(context.Context, Seq, func(Change) error) error {
	return func(ctx context.Context, since Seq, fn func(Change) error) error {
		var n int64
		last := since
		err := ws.ChangesWithDocs(ctx, since, func(c Change) error {
			if err := fn(c); err != nil {
				return err
			}
			n++
			if len(c.Seq) > 0 {
				last = c.Seq
				if !ws.InlineDocsFeed(n + 1) {
					return errInlineDone
				}
			}
			return nil
		})
		if !errors.Is(err, errInlineDone) {
			return err
		}
		r.debug("%d rows read inline; the rest from the plain feed after seq %s", n, last.String())
		return r.src.Changes(ctx, last, fn)
	}
}

// docsFeed is an optional Source ability: a changes feed whose rows carry
// complete revisions when it can (CouchDB's include_docs for live
// generation-1 leaves). InlineDocsFeed says whether that feed is the
// cheaper way to read an initial copy of rows changes rows from this
// source's server (rather than the plain feed and parallel FetchRevs); the
// engine asks, it does not know servers.
type docsFeed interface {
	ChangesWithDocs(ctx context.Context, since Seq, fn func(Change) error) error
	InlineDocsFeed(rows int64) bool
}
