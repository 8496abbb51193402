package replicate

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
)

// The mark of an Unclaimed run (Options.Unclaimed): the caller wrote no
// claim on the target database before the copy, so the run marks the
// database as its own with its first write. The mark is a checkpoint at
// the run's start seq: it says nothing was copied, which is always true,
// and carries what any checkpoint does (session, instance fields, the
// anchor revision), so that a rerun finds this replication's checkpoint
// (the database is its own, not someone else's) and tells a recreated
// source. Where the target can (LocalWriter) it goes in the same
// `_bulk_docs` request as the first revisions, at no request of its own;
// otherwise, or when that request did not store it, it is written with
// PutLocal before a second write. No second write starts before the mark
// is stored: at most one write's revisions can be on the target without
// it, which a caller can recognise by reading them back (package sofa's
// dbcopy.Recognise).

// LocalWriter is an optional Target ability: WriteDocs that also writes
// the `_local` document id (body a JSON object; the document must not
// exist yet) in the same request. stored reports that the target stored
// it: false when no request could carry it or the target refused it
// (that refusal is not among the returned DocErrors).
type LocalWriter interface {
	WriteDocsWithLocal(ctx context.Context, docs []*Doc, id string, body []byte) (fails []DocError, stored bool, err error)
}

// marker is a run's mark while it is owed.
type marker struct {
	// mu is held by the write that carries the mark and by a write that
	// stores it first: later writes wait for it.
	mu     sync.Mutex
	needed bool // no checkpoint of this replication on the target yet
	tried  bool // a write went without storing it
	// writes counts the run's document write calls (see lightEnd).
	writes atomic.Int64
}

// beforeWrite is called before each document write of the run. ride says
// this write should carry the mark (then done must be told whether it was
// stored); a write after one that did not store it stores the mark first.
// done must be called once the write returned.
func (r *run) beforeWrite(ctx context.Context) (ride bool, done func(stored bool), err error) {
	m := r.mark
	nop := func(bool) {}
	if m == nil {
		return false, nop, nil
	}
	m.writes.Add(1)
	m.mu.Lock()
	if !m.needed {
		m.mu.Unlock()
		return false, nop, nil
	}
	if m.tried {
		defer m.mu.Unlock()
		if err := r.cp.storeMark(ctx); err != nil {
			return false, nop, fmt.Errorf("write checkpoint on target: %w", err)
		}
		m.needed = false
		r.debug("checkpoint at the start stored before a second write")
		return false, nop, nil
	}
	m.tried = true
	return true, func(stored bool) {
		if stored {
			m.needed = false
			r.debug("checkpoint at the start stored with the first write")
		}
		m.mu.Unlock()
	}, nil
}

// writeDocs is a document write of the run (Target.WriteDocs), carrying
// the mark when it is owed.
func (r *run) writeDocs(ctx context.Context, docs []*Doc) ([]DocError, error) {
	ride, done, err := r.beforeWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer r.noteTombstoneAtts(docs)
	lw, ok := r.tgt.(LocalWriter)
	if !ride || !ok {
		fails, err := r.tgt.WriteDocs(ctx, docs)
		done(false)
		return fails, err
	}
	doc := r.cp.doc(nil, r.cp.startSeq, r.cp.entry(r.cp.startSeq, Stats{}))
	body, _ := json.Marshal(doc)
	fails, stored, err := lw.WriteDocsWithLocal(ctx, docs, doc.ID, body)
	if stored {
		r.cp.markStored(doc)
	}
	done(stored)
	return fails, err
}

// noteTombstoneAtts warns (WarnTombstoneAttachments) when docs hold a
// deleted revision with attachments and the target keeps none on one.
func (r *run) noteTombstoneAtts(docs []*Doc) {
	t, ok := r.tgt.(TombstoneAttachmentsDropper)
	if !ok || !t.DropsTombstoneAttachments() {
		return
	}
	for _, d := range docs {
		if d.Deleted && len(d.Atts) > 0 {
			r.warn(WarnTombstoneAttachments)
			return
		}
	}
}

// markStored records that the target stored the mark doc (under the
// marker's lock, as every write of cp.tgtLog while a mark is owed).
func (c *checkpointer) markStored(doc *checkpointDoc) {
	if lr, ok := c.target.(LocalRevver); ok {
		if rev, ok := lr.LocalRev(doc.ID); ok {
			doc.Rev = rev
		}
	}
	c.tgtLog = doc
}

// storeMark writes the mark with PutLocal.
func (c *checkpointer) storeMark(ctx context.Context) error {
	doc, err := c.put(ctx, c.target, nil, c.startSeq, c.entry(c.startSeq, Stats{}))
	if err != nil {
		return err
	}
	c.tgtLog = doc
	return nil
}

// markUnwritten stores the mark of an Unclaimed run that ended complete
// without writing (an empty source database, or one whose revisions the
// target held): without it the target database holds no sign of this
// replication, and a later run could not tell it from one of the
// target's own (a sync's DeleteMissing would leave it on the target).
func (r *run) markUnwritten(ctx context.Context) error {
	m := r.mark
	if m == nil || r.opts.NoCheckpoints || m.writes.Load() > 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.needed {
		return nil
	}
	if err := r.cp.storeMark(ctx); err != nil {
		return fmt.Errorf("write checkpoint on target: %w", err)
	}
	m.needed = false
	r.debug("checkpoint at the start stored: the run wrote nothing")
	return nil
}

// lightEnd says the run ends without a final checkpoint: an Unclaimed
// run that ended complete (no error, nothing left out) after reading one
// batch and at most one write, and wrote no checkpoint before (one at the
// start, its mark, aside). Its rerun reads that one batch again, which
// costs less than the `_local` write. With checkpoints on the source too
// the final one is always written.
func (r *run) lightEnd(ctx context.Context, batches int64, err error, tr *tracker) bool {
	if r.mark == nil || r.opts.Continuous || err != nil || ctx.Err() != nil || !r.cp.srcOff {
		return false
	}
	return batches <= 1 && r.mark.writes.Load() <= 1 && r.cp.written == 0 && !tr.held() && len(r.fails.all()) == 0
}
