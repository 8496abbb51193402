package replicate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
)

// resolveAttachments decides, per revision, which attachments travel:
// those the target already holds (at a revision it has that the revision
// descends from: by revpos, checked against the digests that revision
// holds there, see targetHeldAtts) become stubs; the bytes of the
// others are read from the source, once for the leaves of one document
// that share them (same name, revpos and digest: inherited from one
// ancestor). Then each revision joins the write buffer.
func (r *run) resolveAttachments(ctx context.Context, docs []*Doc, reqs []RevRequest, w *writeBuf) error {
	ancestors := map[string][]string{}
	for _, q := range reqs {
		if len(q.AttsSince) > 0 {
			ancestors[q.ID] = q.AttsSince
		}
	}
	have, err := r.targetGenerations(ctx, docs, ancestors)
	if err != nil {
		return err
	}
	held, err := r.targetHeldAtts(ctx, docs, have)
	if err != nil {
		return err
	}
	if err := r.readSmallAttachments(ctx, docs, have, held, w); err != nil {
		return err
	}
	// Bytes shared by the leaves of one document; forgotten at the next
	// document, so that it never keeps alive what the write buffer has
	// flushed and released from the memory budget.
	read := map[attKey]readBytes{}
	lastID := ""
	for _, d := range docs {
		if d.ID != lastID {
			clear(read)
			lastID = d.ID
		}
		if d.NeedsAttachments() {
			if err := r.pace(ctx, func() error { return w.flush(ctx) }); err != nil {
				return err
			}
		}
		pre := d.Size()
		key := d.ID + "\x00" + d.Rev
		readable, err := r.readAttachments(ctx, d, have[key], held[key], w, read)
		if err != nil {
			return err
		}
		w.pending -= pre
		if w.pending < 0 {
			w.pending = 0
		}
		if !readable {
			continue
		}
		if streams(d) {
			if err := r.writeStreamed(ctx, d); err != nil {
				return err
			}
			continue
		}
		if err := w.add(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// attKey names one attachment's content among a document's leaves.
type attKey struct {
	id, name, digest string
	revpos           int
}

// readBytes is what reading an attachment gave; the bytes are shared by
// the leaves that take them, never modified.
type readBytes struct {
	data          []byte
	encoding      string
	encodedLength int64
}

// readAttachments turns the attachments the target holds at generation g
// into stubs (asStub; held: that revision's attachments as the target
// holds them, same name, digest and revpos), and reads the others, or
// takes them from read (what this batch read already), adding what it
// reads. An attachment the source cannot serve (ErrUnreadable) makes the
// revision a reported failure: readable is false and the run goes on.
func (r *run) readAttachments(ctx context.Context, d *Doc, g int, held map[string]*Attachment, w *writeBuf, read map[attKey]readBytes) (readable bool, err error) {
	for _, a := range d.Atts {
		if a.Data != nil {
			// delivered with the revision: kept for a missing_stub
			// rewrite, sent as a stub when the target holds it
			a.Stub = r.asStub(a, g, held)
			if a.Stub {
				r.c.attsSkip.Add(1)
			}
			continue
		}
		if r.asStub(a, g, held) {
			a.Stub = true
			r.c.attsSkip.Add(1)
			continue
		}
		a.Stub = false
		if r.canStream(a) && (w == nil || w.tr == nil || !isDesign(d.ID)) {
			// piped when the revision is written (never a design
			// document's: it waits in the buffer, see writeBuf)
			a.Stream = true
			continue
		}
		k := attKey{d.ID, a.Name, a.Digest, a.RevPos}
		if b, ok := read[k]; ok && a.Digest != "" && a.RevPos > 0 {
			a.Data, a.Encoding, a.EncodedLength = b.data, b.encoding, b.encodedLength
			continue
		}
		if err := w.reserve(ctx, a.StoredLength(), false); err != nil {
			return false, err
		}
		if err := r.src.Attachment(ctx, d.ID, d.Rev, a); err != nil {
			if errors.Is(err, ErrUnreadable) {
				r.unreadable(ctx, d, err)
				return false, nil
			}
			return false, fmt.Errorf("source: %w", err)
		}
		r.c.attsRead.Add(1)
		read[k] = readBytes{a.Data, a.Encoding, a.EncodedLength}
	}
	return true, nil
}

// unreadable records revision d, whose attachment err says the source
// could not serve, as not copied, unless the source has replaced it
// since the feed listed it (edited or deleted during the copy, its
// attachment gone with the old revision): then its newer leaves are
// copied instead, at the end of this run's feed (rereads; a continuous
// run's feed brings them), and d is no longer the source's to copy. Asked of a source that tells a document's leaves
// (LeafReader; one `GET ?open_revs=all`).
func (r *run) unreadable(ctx context.Context, d *Doc, err error) {
	if lr, ok := r.src.(LeafReader); ok {
		if leaves, lerr := lr.Leaves(ctx, d.ID); lerr == nil && len(leaves) > 0 && !slices.Contains(leaves, d.Rev) &&
			(r.opts.Continuous || r.reread.add(Change{ID: d.ID, Revs: leaves})) {
			r.debug("%q rev %s: replaced on the source since the feed listed it (leaves now %v); the newer leaf is copied instead", d.ID, d.Rev, leaves)
			return
		}
	}
	r.fail(ctx, DocError{ID: d.ID, Rev: d.Rev, Error: "read_failed", Reason: err.Error()})
}

// LeafReader is a Source that tells the leaf revisions of a document
// (deleted leaves included; none for a document it does not have), per
// the CouchDB API `GET /db/doc?open_revs=all`.
type LeafReader interface {
	Leaves(ctx context.Context, id string) ([]string, error)
}

// zeroDepth is how many ancestors of a revision the target is asked about
// (when its _revs_diff names no possible ancestors) for attachments of
// revpos 0, which any ancestor may hold.
const zeroDepth = 8

// targetGenerations returns, per revision with attachments to resolve,
// the highest generation of its own history that the target holds (0 if
// none). A target that reports possible_ancestors in _revs_diff (CouchDB:
// its leaves below the missing revision) is taken at its word, none
// meaning none (see ancestorsReported). Another (PouchDB Server, which
// counts as present only revisions it has a body of) is asked with one
// more _revs_diff over the revisions' histories, each revision once per
// document: a revision listed twice is reported missing the second time.
// An attachment of revpos 0 may be held at any generation: for it the
// nearest zeroDepth ancestors count (see targetHeldAtts). A target
// without the StubChecker ability takes no stub: it is asked nothing.
func (r *run) targetGenerations(ctx context.Context, docs []*Doc, ancestors map[string][]string) (map[string]int, error) {
	out := map[string]int{}
	if _, ok := r.tgt.(StubChecker); !ok {
		return out, nil
	}
	ask := map[string][]string{}
	asked := map[string]bool{}
	for _, d := range docs {
		// lowest revpos of the attachments to resolve that an ancestor
		// introduced
		lowest := 0
		for _, a := range d.Atts {
			// Bytes the source delivered with the revision (an archive)
			// still become a stub where the target's _revs_diff names
			// the ancestor (CouchDB: no request more); elsewhere they
			// travel rather than cost a request.
			if a.Data != nil && !r.ancestorsReported() || a.RevPos <= 0 || a.RevPos >= d.Revisions.Start {
				continue
			}
			if lowest == 0 || a.RevPos < lowest {
				lowest = a.RevPos
			}
		}
		if hasZeroRevpos(d) && d.Revisions.Start > 1 {
			z := max(1, d.Revisions.Start-zeroDepth)
			if lowest == 0 || z < lowest {
				lowest = z
			}
		}
		if lowest == 0 {
			continue
		}
		key := d.ID + "\x00" + d.Rev
		if anc, ok := ancestors[d.ID]; ok || r.ancestorsReported() {
			out[key] = highestInHistory(d, anc)
			continue
		}
		if r.noHistoryCheck() {
			continue
		}
		// ancestors of this revision at or above the lowest revpos
		for i := 1; i < len(d.Revisions.IDs); i++ {
			gen := d.Revisions.Start - i
			if gen < lowest {
				break
			}
			rev := strconv.Itoa(gen) + "-" + d.Revisions.IDs[i]
			if k := d.ID + "\x00" + rev; !asked[k] {
				asked[k] = true
				ask[d.ID] = append(ask[d.ID], rev)
			}
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	missing, refused, err := r.revsDiff(ctx, ask)
	if err != nil {
		return nil, err
	}
	// A document the target refuses has no ancestor there: its
	// attachments go whole, and its write reports the refusal.
	for _, f := range refused {
		m := missing[f.ID]
		m.Missing = append(m.Missing, f.Rev)
		missing[f.ID] = m
	}
	for _, d := range docs {
		revs := ask[d.ID]
		if len(revs) == 0 {
			continue
		}
		best := 0
		for i := 1; i < len(d.Revisions.IDs); i++ {
			rev := strconv.Itoa(d.Revisions.Start-i) + "-" + d.Revisions.IDs[i]
			if contains(revs, rev) && !contains(missing[d.ID].Missing, rev) {
				best = max(best, Generation(rev))
			}
		}
		out[d.ID+"\x00"+d.Rev] = best
	}
	return out, nil
}

// ancestorsReported: the target's _revs_diff names possible_ancestors
// (CouchDB), so a document without them has no leaf its missing revisions
// descend from, and no stub can be attached there (CouchDB merges stubs
// from the nearest ancestor whose body it holds; the body-less ancestors
// of a branch it received, which its _revs_diff does count as present,
// give a 412 missing_stub). Such a target is not asked about histories.
func (r *run) ancestorsReported() bool {
	t, ok := r.tgt.(interface{ ReportsPossibleAncestors() bool })
	return ok && t.ReportsPossibleAncestors()
}

// noHistoryCheck: targets that are archives hold nothing to compare.
func (r *run) noHistoryCheck() bool {
	_, ok := r.tgt.(interface{ HoldsNoAncestors() bool })
	return ok
}

func highestInHistory(d *Doc, revs []string) int {
	best := 0
	for _, rev := range revs {
		g := Generation(rev)
		i := d.Revisions.Start - g
		if g <= 0 || i < 0 || i >= len(d.Revisions.IDs) {
			continue
		}
		if hash := rev[len(strconv.Itoa(g))+1:]; hash == d.Revisions.IDs[i] && g > best {
			best = g
		}
	}
	return best
}

// sizeEstimator adapts the number of revisions per fetch so one
// _bulk_get answer stays near WriteBatchBytes.
type sizeEstimator struct {
	mu  sync.Mutex
	avg float64
}

// seed starts the estimate at the source's own average, its
// sizes.external over its rows (CouchDB), when it gives one: the first
// _bulk_get of a database of 2 MiB documents then asks for two of them,
// not for 100 (200 MiB in one answer, before any size was seen).
func (s *sizeEstimator) seed(info DBInfo) {
	if rows := info.DocCount + info.DelCount; info.Bytes > 0 && rows > 0 {
		s.mu.Lock()
		s.avg = float64(info.Bytes) / float64(rows)
		s.mu.Unlock()
	}
}

func (r *run) observeSize(bytes int64, n int) {
	if n == 0 {
		return
	}
	r.size.mu.Lock()
	v := float64(bytes) / float64(n)
	if r.size.avg == 0 {
		r.size.avg = v
	} else {
		r.size.avg = 0.7*r.size.avg + 0.3*v
	}
	r.size.mu.Unlock()
}

func (r *run) fetchChunk() int {
	r.size.mu.Lock()
	avg := r.size.avg
	r.size.mu.Unlock()
	if avg <= 0 {
		return min(r.opts.FetchBatch, 100)
	}
	n := int(float64(r.opts.WriteBatchBytes) / avg)
	return max(1, min(n, r.opts.FetchBatch))
}

// canStream: the attachment is large enough to pipe and both ends can.
func (r *run) canStream(a *Attachment) bool {
	if r.opts.StreamThreshold < 0 || a.StoredLength() < r.opts.StreamThreshold {
		return false
	}
	_, ok := r.src.(AttachmentOpener)
	sw, ok2 := r.tgt.(StreamWriter)
	return ok && ok2 && sw.CanStream(a)
}

func streams(d *Doc) bool {
	for _, a := range d.Atts {
		if a.Stream {
			return true
		}
	}
	return false
}

// writeStreamed writes a revision with piped attachments on its own.
func (r *run) writeStreamed(ctx context.Context, d *Doc) error {
	open := func(a *Attachment) (io.ReadCloser, error) {
		return r.src.(AttachmentOpener).OpenAttachment(ctx, d.ID, d.Rev, a)
	}
	_, done, err := r.beforeWrite(ctx)
	if err != nil {
		return err
	}
	de, err := r.tgt.(StreamWriter).WriteStreamed(ctx, d, open)
	done(false) // a streamed write carries no `_local` document
	if err != nil {
		if errors.Is(err, ErrUnreadable) {
			r.unreadable(ctx, d, err)
			return nil
		}
		return fmt.Errorf("target: %w", err)
	}
	if de != nil {
		r.fail(ctx, *de)
		return nil
	}
	var n int64 = int64(len(d.Body))
	for _, a := range d.Atts {
		if a.Stream {
			n += a.StoredLength()
			r.c.attsRead.Add(1)
			r.c.attsPiped.Add(1)
		}
	}
	r.wrote(ctx, 1)
	r.c.bytes.Add(n)
	return nil
}

// rereads are documents whose revisions the source replaced while the
// run read them (unreadable): readChanges copies their newer leaves once
// every batch before is done. At most maxRereads; beyond, they are
// reported as before (a rerun copies them).
type rereads struct {
	mu     sync.Mutex
	list   []Change
	closed bool
}

// close makes add refuse from now on.
func (q *rereads) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

const maxRereads = 10000

func (q *rereads) add(c Change) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.list) >= maxRereads {
		return false
	}
	q.list = append(q.list, c)
	return true
}

func (q *rereads) take() []Change {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.list
	q.list = nil
	return l
}
