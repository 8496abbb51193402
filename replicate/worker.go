package replicate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// diffSkipper decides when _revs_diff can be skipped: while nearly every
// revision offered is missing on the target (an initial copy), asking is
// wasted work; writes with new_edits=false are idempotent, so sending a
// revision the target has is harmless. Every 16th batch probes again,
// unless the target was created empty for this run (always): it holds
// nothing but what this run wrote, so a probe could only say "missing".
type diffSkipper struct {
	mu     sync.Mutex
	ewma   float64
	count  int
	always bool
}

// init sets the estimate of the share of revisions missing, and ends
// skipAlways (a Session's later pass asks again).
func (s *diffSkipper) init(v float64) { s.mu.Lock(); s.ewma, s.always = v, false; s.mu.Unlock() }

// skipAlways makes every skip say yes until the next init (the initial
// copy into a target created for this run).
func (s *diffSkipper) skipAlways() { s.mu.Lock(); s.always = true; s.mu.Unlock() }

func (s *diffSkipper) skip() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	return s.always || s.ewma > 0.95 && s.count%16 != 0
}

func (s *diffSkipper) observe(missing, checked int) {
	if checked == 0 {
		return
	}
	s.mu.Lock()
	s.ewma = 0.6*s.ewma + 0.4*float64(missing)/float64(checked)
	s.mu.Unlock()
}

// process copies one batch: revs_diff, fetch, attachments, write. It
// returns the batch's design documents when they must wait (see
// writeBuf), unwritten.
func (r *run) process(ctx context.Context, b *batch, tr *tracker) ([]*Doc, error) {
	revs := make(map[string][]string, len(b.changes))
	checked, found := 0, 0
	if r.opts.Debug != nil {
		t0 := time.Now()
		defer func() {
			r.debug("batch %d: %d changes to seq %s, %d revisions checked, %d missing, done in %s",
				b.n, len(b.changes), b.seq.String(), checked, found, time.Since(t0).Round(time.Millisecond))
		}()
	}
	// A new document read live with its row (generation 1, its only
	// leaf) is taken as missing: the target can hold nothing older, and a
	// write with new_edits=false of a revision it has is a no-op, so
	// asking _revs_diff would only cost a round trip.
	var known map[string]Missing
	live := r.liveDocs.Load()
	for _, c := range b.changes {
		k, isKnown := known[c.ID]
		if live && newLiveDoc(c) && revs[c.ID] == nil {
			if !isKnown {
				if known == nil {
					known = map[string]Missing{}
				}
				known[c.ID] = Missing{Missing: c.Revs}
				checked++
				continue
			}
			if k.Missing[0] == c.Revs[0] {
				continue // the same row again (a feed resumed)
			}
		}
		if isKnown {
			// Listed again with other revisions: every revision of the
			// document is asked about.
			revs[c.ID] = append(revs[c.ID], k.Missing...)
			delete(known, c.ID)
		}
		for _, rev := range c.Revs {
			if !contains(revs[c.ID], rev) {
				revs[c.ID] = append(revs[c.ID], rev)
				checked++
			}
		}
	}
	r.c.missingChecked.Add(int64(checked))
	var missing map[string]Missing
	switch {
	case len(revs) == 0:
		missing = make(map[string]Missing, len(known))
	case !r.localDiff && r.diff.skip():
		missing = make(map[string]Missing, len(revs)+len(known))
		for id, rs := range revs {
			missing[id] = Missing{Missing: rs}
		}
	default:
		var refused []DocError
		var err error
		missing, refused, err = r.revsDiff(ctx, revs)
		if err != nil {
			return nil, err
		}
		// Revisions the target refused are not copied: reported as a
		// write refused for the same reason is (see rejected).
		r.fail(ctx, refused...)
		n := 0
		for _, m := range missing {
			n += len(m.Missing)
		}
		r.diff.observe(n, checked-len(known)-len(refused))
	}
	for id, m := range known {
		missing[id] = m
	}
	for _, m := range missing {
		found += len(m.Missing)
	}
	r.c.missingFound.Add(int64(found))
	if found == 0 {
		return nil, nil
	}
	w := &writeBuf{r: r, tr: tr, n: b.n}
	// Revisions the source delivered with the feed (an archive, or
	// include_docs rows) are written from there; their attachments not yet
	// read are resolved like fetched ones.
	covered := map[string]bool{}
	var needAtts []*Doc
	var attsSince []RevRequest
	for _, c := range b.changes {
		m, ok := missing[c.ID]
		if !ok {
			continue
		}
		for _, d := range c.Docs {
			key := d.ID + "\x00" + d.Rev
			if !contains(m.Missing, d.Rev) || covered[key] {
				continue
			}
			covered[key] = true
			r.c.docsRead.Add(1)
			if err := w.reserve(ctx, d.Size(), true); err != nil {
				return nil, err
			}
			// Attachment bytes delivered with the revision that an
			// ancestor the target holds introduced go as stubs.
			if d.NeedsAttachments() || len(m.PossibleAncestors) > 0 && r.ancestorsReported() && inheritsBytes(d) {
				w.pending += d.Size()
				needAtts = append(needAtts, d)
				if len(m.PossibleAncestors) > 0 {
					attsSince = append(attsSince, RevRequest{ID: d.ID, Rev: d.Rev, AttsSince: m.PossibleAncestors})
				}
				continue
			}
			if err := w.add(ctx, d); err != nil {
				return nil, err
			}
		}
	}
	if len(needAtts) > 0 {
		if err := r.resolveAttachments(ctx, needAtts, attsSince, w); err != nil {
			return nil, err
		}
	}
	// The other missing revisions are fetched, in changes order; an id
	// listed twice is asked once.
	var reqs []RevRequest
	seen := make(map[string]bool, len(missing))
	for _, c := range b.changes {
		m, ok := missing[c.ID]
		if !ok || seen[c.ID] {
			continue
		}
		seen[c.ID] = true
		for _, rev := range m.Missing {
			if len(covered) == 0 || !covered[c.ID+"\x00"+rev] {
				reqs = append(reqs, RevRequest{ID: c.ID, Rev: rev, AttsSince: m.PossibleAncestors})
			}
		}
	}
	for len(reqs) > 0 {
		n := min(len(reqs), r.fetchChunk())
		chunk := reqs[:n]
		reqs = reqs[n:]
		if err := r.pace(ctx, func() error { return w.flush(ctx) }); err != nil {
			return nil, err
		}
		docs, errs, err := r.fetchAll(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("source: %w", err)
		}
		r.fail(ctx, errs...)
		docs = distinctRevs(docs, covered)
		r.c.docsRead.Add(int64(len(docs)))
		var bodies int64
		for _, d := range docs {
			bodies += d.Size()
		}
		r.observeSize(bodies, len(docs))
		// Bodies are in memory already: account for them, waiting only
		// while this worker holds nothing.
		if err := w.reserve(ctx, bodies, true); err != nil {
			return nil, err
		}
		w.pending += bodies
		if err := r.resolveAttachments(ctx, docs, chunk, w); err != nil {
			return nil, err
		}
	}
	return w.finish(ctx)
}

// fetchAll reads reqs from the source and holds it to answering every
// document asked for, with a revision or an error: a document its answer
// leaves out (a proxy that dropped part of a `_bulk_get` answer) is asked
// again once, then reported as not copied (not_returned), never passed
// over by a checkpoint.
func (r *run) fetchAll(ctx context.Context, reqs []RevRequest) ([]*Doc, []DocError, error) {
	docs, errs, err := r.src.FetchRevs(ctx, reqs)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		left := unanswered(reqs, docs, errs)
		if len(left) == 0 {
			return docs, errs, nil
		}
		if attempt > 0 {
			for _, q := range left {
				errs = append(errs, DocError{ID: q.ID, Rev: q.Rev, Error: "not_returned", Reason: "the source's answer left this document out, twice"})
			}
			return docs, errs, nil
		}
		r.debug("the source's answer left out %d of %d documents asked for (first %q): asking again", len(left), len(reqs), left[0].ID)
		more, moreErrs, err := r.src.FetchRevs(ctx, left)
		if err != nil {
			return nil, nil, err
		}
		docs, errs = append(docs, more...), append(errs, moreErrs...)
		reqs = left
	}
}

// unanswered lists the requests whose document has neither a revision
// in docs nor an error in errs (a request for a revision no longer a
// leaf may be answered with newer leaves: any revision of the document
// answers it).
func unanswered(reqs []RevRequest, docs []*Doc, errs []DocError) []RevRequest {
	got := make(map[string]bool, len(docs)+len(errs))
	for _, d := range docs {
		got[d.ID] = true
	}
	for _, e := range errs {
		got[e.ID] = true
	}
	var left []RevRequest
	for _, q := range reqs {
		if !got[q.ID] {
			left = append(left, q)
		}
	}
	return left
}

// newLiveDoc: the row's only leaf is a generation-1 revision that came
// with the row.
func newLiveDoc(c Change) bool {
	return len(c.Revs) == 1 && len(c.Docs) == 1 && c.Docs[0].Rev == c.Revs[0] && strings.HasPrefix(c.Revs[0], "1-")
}

// revsDiff asks the target which of revs it lacks. When it refuses the
// whole request for one of its documents (CouchDB answers a partitioned
// database's `_revs_diff` with one 400 illegal_docid when any id lacks a
// partition), or refuses it as too large (a 413 over the server's
// max_http_request_size, which the target reports as a DocRefusal too),
// the request is split in halves, asked again, until each part is
// accepted or each refused document is alone: one such document costs
// O(log n) requests.
// The refused revisions are returned with the server's words, and the
// others are compared as usual. Any other error fails the batch.
func (r *run) revsDiff(ctx context.Context, revs map[string][]string) (map[string]Missing, []DocError, error) {
	missing, err := r.tgt.RevsDiff(ctx, revs)
	if err == nil {
		return missing, nil, nil
	}
	name, reason, ok := docRefused(err)
	if !ok {
		return nil, nil, fmt.Errorf("target: %w", err)
	}
	if len(revs) == 1 {
		var refused []DocError
		for id, rs := range revs {
			for _, rev := range rs {
				refused = append(refused, DocError{ID: id, Rev: rev, Error: name, Reason: reason})
			}
			r.debug("_revs_diff: the target refuses document %q: %s: %s", id, name, reason)
		}
		return map[string]Missing{}, refused, nil
	}
	ids := make([]string, 0, len(revs))
	for id := range revs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	h := len(ids) / 2
	out := map[string]Missing{}
	var refused []DocError
	for _, part := range [][]string{ids[:h], ids[h:]} {
		sub := make(map[string][]string, len(part))
		for _, id := range part {
			sub[id] = revs[id]
		}
		m, f, err := r.revsDiff(ctx, sub)
		if err != nil {
			return nil, nil, err
		}
		maps.Copy(out, m)
		refused = append(refused, f...)
	}
	return out, refused, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writeBuf is one worker's write buffer, flushed at WriteBatchDocs
// revisions or WriteBatchBytes bytes. It holds units of the shared
// in-flight budget for the revisions it holds (acq) and releases them once
// they are written. A worker only ever waits for budget while it holds
// none, so workers cannot deadlock; when it must take more while holding
// some (an attachment of a document being prepared), it overdraws instead
// of waiting, which bounds the excess to one document per worker.
type writeBuf struct {
	r       *run
	docs    []*Doc
	bytes   int64
	acq     int64 // budget units taken from the semaphore
	pending int64 // bytes reserved for documents not yet in docs
	// Design documents wait in held until the batch's other revisions
	// are written, every batch numbered below n (in tr) is finished and
	// every other batch cut by then has its revisions written. A
	// validate_doc_update function written before older documents would
	// judge (and may refuse) them on the target, where the source never
	// did. When that holds already, they go with the batch's last write
	// (a target validates a request's documents against the design
	// documents it held before it), so a database copied in one write
	// still is; otherwise they wait off the worker (writeHeld). Held
	// revisions are outside the budget while they wait. A nil tr holds
	// nothing.
	held []*Doc
	tr   *tracker
	n    int64
}

// isDesign: id names a design document.
func isDesign(id string) bool { return strings.HasPrefix(id, "_design/") }

// finish writes what the buffer holds. The held design documents go
// with it when every earlier batch is finished and every other batch cut
// has written its documents; otherwise they are returned, to be written
// off the worker once that holds (writeHeld).
func (w *writeBuf) finish(ctx context.Context) ([]*Doc, error) {
	if len(w.held) > 0 && w.tr.prefixDone(w.n) && w.tr.othersWritten(w.n) {
		w.docs, w.held = append(w.docs, w.held...), nil
	}
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	return w.held, nil
}

func (w *writeBuf) reserve(ctx context.Context, n int64, mayFlush bool) error {
	n = min(n, w.r.opts.MaxInflightBytes)
	if n <= 0 {
		return nil
	}
	if w.r.mem.TryAcquire(n) {
		w.acq += n
		return nil
	}
	if mayFlush && len(w.docs) > 0 {
		if err := w.flush(ctx); err != nil {
			return err
		}
		if w.r.mem.TryAcquire(n) {
			w.acq += n
			return nil
		}
	}
	if w.acq > 0 {
		return nil // overdraw rather than wait while holding budget
	}
	if err := w.r.mem.Acquire(ctx, n); err != nil {
		return err
	}
	w.acq += n
	return nil
}

// add queues one revision whose memory is already reserved (a design
// document in held, see writeBuf).
func (w *writeBuf) add(ctx context.Context, d *Doc) error {
	if w.tr != nil && isDesign(d.ID) {
		w.held = append(w.held, d)
		return nil
	}
	w.docs = append(w.docs, d)
	w.bytes += d.Size()
	if len(w.docs) >= w.r.opts.WriteBatchDocs || w.bytes >= w.r.opts.WriteBatchBytes {
		return w.flush(ctx)
	}
	return nil
}

func (w *writeBuf) flush(ctx context.Context) error {
	var err error
	if len(w.docs) > 0 {
		docs := w.docs
		w.docs, w.bytes = nil, 0
		if err = ctx.Err(); err == nil {
			dctx, done := drain(ctx, interruptGrace)
			err = w.r.write(dctx, docs)
			done()
		}
		// The batch's slices still point at these revisions: drop their
		// bytes so memory follows the budget, not the batch.
		for _, d := range docs {
			d.Body = nil
			for _, a := range d.Atts {
				a.Data = nil
			}
		}
	}
	// Release what is not reserved for documents still being prepared.
	keep := min(w.pending, w.acq)
	if rel := w.acq - keep; rel > 0 {
		w.r.mem.Release(rel)
		w.acq = keep
	}
	return err
}

// write stores revisions, splitting the request when the target refuses
// it whole (413/400) until the offending revisions are isolated.
func (r *run) write(ctx context.Context, docs []*Doc) error {
	fails, err := r.writeDocs(ctx, docs)
	if errors.Is(err, ErrBatchRejected) {
		if len(docs) == 1 {
			if errors.Is(err, ErrMissingStub) {
				if ok, err := r.rewriteWithData(ctx, docs[0]); err != nil || !ok {
					return err
				}
				r.wrote(ctx, 1)
				r.c.bytes.Add(docs[0].sentSize())
				return nil
			}
			r.fail(ctx, rejected(docs[0], err))
			return nil
		}
		h := len(docs) / 2
		if err := r.write(ctx, docs[:h]); err != nil {
			return err
		}
		return r.write(ctx, docs[h:])
	}
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	failed := map[string]bool{}
	for _, f := range fails {
		if f.Error == "missing_stub" || f.Error == "http_412" {
			if d := findDoc(docs, f.ID, f.Rev); d != nil {
				ok, err := r.rewriteWithData(ctx, d)
				if err != nil {
					return err
				}
				if !ok {
					failed[d.ID+"\x00"+d.Rev] = true
				}
				continue
			}
		}
		failed[f.ID+"\x00"+f.Rev] = true
		r.fail(ctx, f)
	}
	for _, d := range docs {
		if !failed[d.ID+"\x00"+d.Rev] {
			r.wrote(ctx, 1)
			r.c.bytes.Add(d.sentSize())
		}
	}
	return nil
}

// rewriteWithData handles 412 missing_stub: the target lacks an attachment
// we sent as a stub, so read every attachment and write the revision again.
// ok says the revision was written; when not, its failure is recorded.
func (r *run) rewriteWithData(ctx context.Context, d *Doc) (ok bool, err error) {
	for _, a := range d.Atts {
		a.Stub = false
		if a.Data == nil {
			if err := r.src.Attachment(ctx, d.ID, d.Rev, a); err != nil {
				if !errors.Is(err, ErrUnreadable) {
					return false, fmt.Errorf("source: %w", err)
				}
				r.unreadable(ctx, d, err)
				return false, nil
			}
		}
	}
	fails, err := r.writeDocs(ctx, []*Doc{d})
	if err != nil {
		if errors.Is(err, ErrBatchRejected) {
			r.fail(ctx, rejected(d, err))
			return false, nil
		}
		return false, fmt.Errorf("target: %w", err)
	}
	if len(fails) > 0 {
		r.fail(ctx, fails...)
		return false, nil
	}
	return true, nil
}

// batchFailedKey keys the *batchAcct in a batch's context: fail sets
// its failed flag, so that the checkpoint never passes a batch with
// failures, and counts what the Observer is told.
type batchFailedKey struct{}

func (r *run) fail(ctx context.Context, errs ...DocError) {
	if len(errs) == 0 {
		return
	}
	r.fails.add(errs...)
	r.c.docWriteFailures.Add(int64(len(errs)))
	if a, ok := ctx.Value(batchFailedKey{}).(*batchAcct); ok {
		a.failed.Store(true)
		a.failures.Add(int64(len(errs)))
	}
}

func findDoc(docs []*Doc, id, rev string) *Doc {
	for _, d := range docs {
		if d.ID == id && (rev == "" || d.Rev == rev) {
			return d
		}
	}
	return nil
}

// rejected is the failure of revision d, refused alone with err (which
// wraps ErrBatchRejected): in the server's words when it refused the
// document for what it is (a DocRefusal, as revsDiff reports it),
// otherwise "rejected" with the error's text.
func rejected(d *Doc, err error) DocError {
	if name, reason, ok := docRefused(err); ok {
		return DocError{ID: d.ID, Rev: d.Rev, Error: name, Reason: reason}
	}
	return DocError{ID: d.ID, Rev: d.Rev, Error: "rejected", Reason: reasonOf(err)}
}

func reasonOf(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, ErrBatchRejected.Error()+": ")
	return s
}

// distinctRevs drops from docs the revisions seen already in the batch
// (seen, keyed id NUL rev, which it extends) and those that another of
// docs, of the same document, has in its history: only leaves are
// copied, and writing a revision with its `_revisions` puts its
// ancestors in the target's revision tree. CouchDB answers a request for
// a revision with its latest leaf (`latest=true`), so the revisions of a
// document edited several times within one batch come back as one leaf;
// PouchDB Server answers each revision asked, whose history then covers
// the others. Each leaf is written once, its attachments with it (a
// document created with a 4.5 MB attachment and edited ten times within
// a batch was written eleven times, 47 MiB).
func distinctRevs(docs []*Doc, seen map[string]bool) []*Doc {
	var below map[string]bool // id NUL rev of revisions under another of docs
	for i := 1; i < len(docs); i++ {
		if docs[i].ID != docs[i-1].ID {
			continue
		}
		if below == nil {
			below = map[string]bool{}
		}
		for _, d := range docs[i-1 : i+1] {
			for g, id := range d.Revisions.IDs {
				if g > 0 {
					below[d.ID+"\x00"+strconv.Itoa(d.Revisions.Start-g)+"-"+id] = true
				}
			}
		}
	}
	out := docs[:0]
	for _, d := range docs {
		key := d.ID + "\x00" + d.Rev
		if seen[key] || below[key] {
			continue
		}
		seen[key] = true
		out = append(out, d)
	}
	return out
}
