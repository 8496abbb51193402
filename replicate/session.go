package replicate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Session is one source/target pair replicated in passes, kept open in
// between (a whole-server sync wakes each database when it changes): Open
// does once what every Run does before reading the changes feed (the
// databases' info, the replication id, the checkpoints read and judged,
// the metadata set); then each Pass costs only what the changes need
// (`_changes?since=` the seq reached, `_revs_diff`, `_bulk_get`,
// `_bulk_docs`), and Checkpoint records the seq reached when the caller
// decides (a timer, shutdown), never ahead of acknowledged writes.
//
// A Session is safe for concurrent use: passes run one at a time,
// Checkpoint may run during a pass.
type Session struct {
	r     *run
	id    string
	t0    time.Time
	mu    sync.Mutex // one pass at a time
	first bool       // the next pass is the first (under mu)
	// since is the seq every change up to which is acknowledged (under
	// sinceMu); tr is the running pass's tracker, nil between passes.
	sinceMu sync.Mutex
	since   Seq
	tr      *tracker
	// from is where the next pass reads the feed (nil: since): beyond
	// since when a pass left revisions it could not copy (held), which
	// the next pass tries again first (retry), or, when they are too
	// many to list (retry nil), leaves to a new Session: since stays
	// where it is for this one.
	from   Seq
	held   bool
	retry  []Change
	lastCP atomic.Int64 // unix nanoseconds of the last checkpoint written
}

// Open prepares a replication of src to tgt for passes (see Session):
// Options as for Run, except Continuous, which is refused (a Session's
// passes each read the changes feed to its end). An error is from the
// source's or target's info, checkpoints or metadata.
func Open(ctx context.Context, src Source, tgt Target, opts Options) (*Session, error) {
	if opts.Continuous {
		return nil, errors.New("replicate: Open: Options.Continuous is for Run (a Session reads the feed in passes)")
	}
	s, _, err := open(ctx, src, tgt, opts)
	if err != nil {
		return nil, err
	}
	// The checkpoint read is where the session starts: nothing to write
	// until a pass gets further.
	s.r.cp.lastSeq = s.since
	return s, nil
}

// ReplicationID is the session's replication id (the `_local` document
// holding its checkpoint: `_local/<id>`).
func (s *Session) ReplicationID() string { return s.id }

// Seq is the seq up to which every change read is acknowledged by the
// target (nil: none yet, from the beginning); the next pass starts after
// it.
func (s *Session) Seq() Seq {
	s.sinceMu.Lock()
	defer s.sinceMu.Unlock()
	if s.tr != nil {
		if t := s.tr.through(); len(t) > 0 {
			return t
		}
	}
	return s.since
}

// Dirty reports whether the seq reached is beyond the last checkpoint.
func (s *Session) Dirty() bool {
	if s.r.opts.NoCheckpoints {
		return false
	}
	seq := s.Seq()
	s.r.cp.mu.Lock()
	defer s.r.cp.mu.Unlock()
	return len(seq) > 0 && string(seq) != string(s.r.cp.lastSeq)
}

// CheckpointedAt is when the session last wrote a checkpoint (zero: never).
func (s *Session) CheckpointedAt() time.Time {
	if n := s.lastCP.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Pass copies what the source's changes feed holds beyond Seq, to the
// feed's end (one-shot pages), and returns what it did: Result.StartSeq
// and EndSeq are the seqs it started after and reached, Stats this pass's
// counters, Failures the revisions it could not copy (a batch with
// failures holds Seq before it; the next pass tries those revisions
// again first, then reads the feed on from where this one stopped, so
// a refused revision costs each later pass one retry, not the feed
// since it; with more than 10,000 of them, Seq stays held for the
// session and a new one, after a restart, tries them). The first pass is the one that copies an initial copy's
// documents, and sets `_security` after them (CopyMetadata).
//
// A pass checkpoints every CheckpointInterval while it runs, and once
// more when ctx is cancelled (as Run); otherwise its end is not
// checkpointed: call Checkpoint. On error the seq reached stays what was
// acknowledged, and the next pass resumes there.
func (s *Session) Pass(ctx context.Context) (*Result, error) {
	return s.pass(ctx, false)
}

// pass runs one pass; final: the end is checkpointed whatever happens
// (Run).
func (s *Session) pass(ctx context.Context, final bool) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.r
	t0 := time.Now()
	first := s.first
	if first {
		t0 = s.t0
	}
	s.first = false
	before := r.c.Snapshot()
	if !first {
		r.fails.reset()
		r.mu.Lock()
		r.warnings = nil
		r.mu.Unlock()
		// Later passes read changes the target has likely not seen
		// (with their generation-1 documents inline where the source
		// offers it), and ask _revs_diff for the others: their ancestors
		// on the target spare attachments.
		r.initialCopy = false
		r.passFeed = true
		r.liveDocs.Store(true)
		r.diff.init(0)
	}
	s.sinceMu.Lock()
	since, from, retry := s.since, s.since, s.retry
	tr := newTracker()
	if !final {
		tr.thru = since
		if len(s.from) > 0 {
			from = s.from
		}
		tr.read = from
		if s.held && retry == nil {
			tr.stuck, tr.inherited = true, true
		}
	}
	s.tr = tr
	s.sinceMu.Unlock()

	res := &Result{ReplicationID: s.id, StartSeq: since, EndSeq: since}
	r.retry = retry
	through, err := r.pipeline(ctx, from, r.cp, tr, final)
	r.retry = nil
	s.sinceMu.Lock()
	if t := tr.through(); len(t) > 0 {
		s.since = t
	}
	if t := tr.readThrough(); len(t) > 0 {
		s.from = t
	}
	s.held, s.retry = held(tr, err, retry, r.fails.all())
	s.tr = nil
	if final {
		if len(through) > 0 {
			res.EndSeq = through
		}
	} else {
		res.EndSeq = s.since
	}
	s.sinceMu.Unlock()
	if n := r.c.checkpoints.Load(); n > before.Checkpoints {
		s.lastCP.Store(time.Now().UnixNano())
	}
	r.cp.mu.Lock()
	res.TargetOnlyCheckpoints = r.cp.srcOff
	r.cp.mu.Unlock()
	if err == nil && first && r.opts.CopyMetadata && !r.opts.Continuous {
		if merr := r.tgt.SetMetadata(ctx, r.meta, AfterDocs); errors.Is(merr, ErrMetadataRefused) {
			r.warn("target: " + merr.Error())
		} else if merr != nil {
			err = fmt.Errorf("target: %w", merr)
		}
	}
	res.Stats = r.c.Snapshot().sub(before)
	res.Failures = r.fails.all()
	r.mu.Lock()
	res.Warnings = r.warnings
	r.mu.Unlock()
	res.Duration = time.Since(t0)
	return res, err
}

// maxRetry bounds the revisions a Session tries again in its next pass;
// beyond it, a restart does.
const maxRetry = 10000

// held says what a pass with tracker tr leaves to the next: whether the
// seq acknowledged is held before revisions not copied, and which to try
// again (nil while held: too many, or held from before). A pass that
// failed may not have tried its retry: those stay listed (trying a
// revision the target holds costs one `_revs_diff` row).
func held(tr *tracker, err error, retry []Change, fails []DocError) (bool, []Change) {
	if tr.inherited {
		return true, nil
	}
	var next []Change
	if err != nil {
		next = append(next, retry...)
	}
	if !tr.held() && len(next) == 0 {
		return false, nil
	}
	seen := map[[2]string]bool{}
	for _, c := range next {
		seen[[2]string{c.ID, c.Revs[0]}] = true
	}
	for _, f := range fails {
		if f.ID == "" || f.Rev == "" || len(next) >= maxRetry {
			return true, nil
		}
		if k := [2]string{f.ID, f.Rev}; !seen[k] {
			seen[k] = true
			next = append(next, Change{ID: f.ID, Revs: []string{f.Rev}})
		}
	}
	if len(next) == 0 {
		return true, nil
	}
	return true, next
}

// Checkpoint writes the session's checkpoint at Seq if it moved since
// the last one (nothing otherwise). Errors are the source's or target's
// (the next call tries again).
func (s *Session) Checkpoint(ctx context.Context) error {
	s.sinceMu.Lock()
	tr := s.tr
	if tr == nil {
		tr = &tracker{thru: s.since}
	}
	s.sinceMu.Unlock()
	before := s.r.c.checkpoints.Load()
	err := s.r.checkpoint(ctx, s.r.cp, tr)
	if s.r.c.checkpoints.Load() > before {
		s.lastCP.Store(time.Now().UnixNano())
	}
	return err
}

// SourceRecreated reports whether the source database looks deleted and
// created again since the session opened, so that the seq reached means
// nothing there: info, the source's info read lately (nil: none), has
// another instance_start_time, or an update_seq behind the seq reached
// (integer seqs); or, where seqs are integers (PouchDB Server, which
// keeps instance_start_time across a recreation), the source no longer
// knows the anchor revision recorded at the first copy (one _revs_diff
// on the source). A CouchDB source with clustered seqs is not asked: its
// `_db_updates` says when a database is deleted or created, and a since
// from another database's shards is read there from the beginning.
// Reopen the database (Open) when true: its checkpoint is judged again.
func (s *Session) SourceRecreated(ctx context.Context, info *DBInfo) (bool, error) {
	since := s.Seq()
	cp := s.r.cp
	if info != nil {
		if changedInstance(cp.srcInst, info.InstanceStart) || seqAhead(since, info.UpdateSeq) {
			return true, nil
		}
	}
	a, tail := cp.getAnchor(), cp.getTail()
	if a == nil && tail == nil || !integerSeq(since) {
		return false, nil
	}
	gone, err := anchorGone(ctx, s.r.src, a, tail)
	return gone != nil, err
}

func integerSeq(s Seq) bool {
	_, err := strconv.ParseInt(string(s), 10, 64)
	return err == nil
}

// sub is s minus b, counter by counter.
func (s Stats) sub(b Stats) Stats {
	return Stats{
		ChangesRead: s.ChangesRead - b.ChangesRead, MissingChecked: s.MissingChecked - b.MissingChecked,
		MissingFound: s.MissingFound - b.MissingFound, DocsRead: s.DocsRead - b.DocsRead,
		DocsWritten: s.DocsWritten - b.DocsWritten, DocWriteFailures: s.DocWriteFailures - b.DocWriteFailures,
		Bytes: s.Bytes - b.Bytes, AttachmentsRead: s.AttachmentsRead - b.AttachmentsRead,
		AttachmentsSkip: s.AttachmentsSkip - b.AttachmentsSkip, AttachmentsPiped: s.AttachmentsPiped - b.AttachmentsPiped,
		Batches: s.Batches - b.Batches, Checkpoints: s.Checkpoints - b.Checkpoints,
	}
}
