package verify

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

type revKey struct{ id, rev string }

// compareLeaves fetches every leaf both sides hold, FetchBatch at a time,
// from both sides at once, and compares them pairwise.
func compareLeaves(ctx context.Context, a, b replicate.Source, docs map[string]*entry, r *Report, opts Options) error {
	ids := make([]string, 0, len(docs))
	for id, e := range docs {
		if e.seenB && len(e.leaves) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var batch []replicate.RevRequest
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := compareBatch(ctx, a, b, batch, r, opts)
		batch = batch[:0]
		return err
	}
	for _, id := range ids {
		for _, rev := range docs[id].leaves {
			batch = append(batch, replicate.RevRequest{ID: id, Rev: rev})
		}
		if len(batch) >= opts.FetchBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

type fetched struct {
	docs map[revKey]*replicate.Doc
	errs map[revKey]string
	err  error
}

func fetch(ctx context.Context, s replicate.Source, reqs []replicate.RevRequest) fetched {
	docs, derrs, err := s.FetchRevs(ctx, reqs)
	f := fetched{docs: make(map[revKey]*replicate.Doc, len(docs)), errs: map[revKey]string{}, err: err}
	for _, d := range docs {
		f.docs[revKey{d.ID, d.Rev}] = d
	}
	for _, e := range derrs {
		f.errs[revKey{e.ID, e.Rev}] = e.Error + ": " + e.Reason
	}
	return f
}

func compareBatch(ctx context.Context, a, b replicate.Source, reqs []replicate.RevRequest, r *Report, opts Options) error {
	bc := make(chan fetched, 1)
	go func() { bc <- fetch(ctx, b, reqs) }()
	fa := fetch(ctx, a, reqs)
	fb := <-bc
	if fa.err != nil {
		return fmt.Errorf("verify: a: %w", fa.err)
	}
	if fb.err != nil {
		return fmt.Errorf("verify: b: %w", fb.err)
	}
	for _, q := range reqs {
		k := revKey{q.ID, q.Rev}
		da, db := fa.docs[k], fb.docs[k]
		if da == nil || db == nil {
			r.addf(KindUnreadable, q.ID, q.Rev, "a: %s; b: %s", readState(da, fa.errs[k]), readState(db, fb.errs[k]))
			continue
		}
		r.Leaves++
		compareDoc(ctx, a, b, da, db, r, opts)
	}
	return nil
}

func readState(d *replicate.Doc, err string) string {
	switch {
	case d != nil:
		return "read"
	case err != "":
		return err
	}
	return "not returned"
}

// compareDoc compares one leaf revision read from both sides.
func compareDoc(ctx context.Context, a, b replicate.Source, da, db *replicate.Doc, r *Report, opts Options) {
	id, rev := da.ID, da.Rev
	if da.Deleted != db.Deleted {
		r.addf(KindDeleted, id, rev, "leaf deleted in a: %t, in b: %t", da.Deleted, db.Deleted)
	}
	ca, errA := canonicalBody(da.Body)
	cb, errB := canonicalBody(db.Body)
	switch {
	case errA != nil || errB != nil:
		r.addf(KindBody, id, rev, "cannot parse body: a: %v; b: %v", errA, errB)
	case string(ca) != string(cb):
		r.addf(KindBody, id, rev, "a %s; b %s", clip(ca), clip(cb))
	case !opts.DoubleNumbers:
		if d := bigIntegerDiff(da.Body, db.Body); d != "" {
			r.addf(KindBody, id, rev, "%s", d)
		}
	}
	if d := historyDiff(da.Revisions, db.Revisions, opts.revsLimitA, opts.revsLimitB); d != "" {
		r.addf(KindHistory, id, rev, "%s", d)
	}
	compareAttachments(ctx, a, b, da, db, r, opts)
}

// historyDiff compares two `_revisions`: the same start and ids. A
// shorter history is accepted only as a stemmed one: a prefix of the
// other, exactly as long as its own database's _revs_limit (limA, limB; 0
// when unknown) allows, when that limit is not below the other side's
// (a copy into a database of a lower _revs_limit lost history the source
// keeps). "" means equal.
func historyDiff(a, b replicate.Revisions, limA, limB int) string {
	if a.Start != b.Start {
		return fmt.Sprintf("_revisions.start a %d, b %d", a.Start, b.Start)
	}
	n := min(len(a.IDs), len(b.IDs))
	for i := range n {
		if a.IDs[i] != b.IDs[i] {
			return fmt.Sprintf("ancestor at generation %d: a %s, b %s", a.Start-i, a.IDs[i], b.IDs[i])
		}
	}
	var why string
	switch {
	case len(a.IDs) < len(b.IDs):
		why = stemmedWhy("a", "b", len(a.IDs), limA, limB)
	case len(b.IDs) < len(a.IDs):
		why = stemmedWhy("b", "a", len(b.IDs), limB, limA)
	}
	if why != "" {
		return fmt.Sprintf("history a %d revisions, b %d (%s)", len(a.IDs), len(b.IDs), why)
	}
	return ""
}

// stemmedWhy says why the shorter history (n revisions) of side short
// is a difference, "" when its own _revs_limit lim, not below the other
// side's, explains it.
func stemmedWhy(short, other string, n, lim, otherLim int) string {
	switch {
	case lim <= 0 || n != lim:
		return short + "'s _revs_limit does not explain it"
	case otherLim > lim:
		return fmt.Sprintf("%s's _revs_limit %d is below %s's %d: history lost", short, lim, other, otherLim)
	}
	return ""
}

func compareAttachments(ctx context.Context, a, b replicate.Source, da, db *replicate.Doc, r *Report, opts Options) {
	bs := make(map[string]*replicate.Attachment, len(db.Atts))
	for _, att := range db.Atts {
		bs[att.Name] = att
	}
	gen := replicate.Generation(da.Rev)
	for _, x := range da.Atts {
		y, ok := bs[x.Name]
		if !ok {
			r.addf(KindAttachment, da.ID, da.Rev, "attachment %q only in a", x.Name)
			continue
		}
		delete(bs, x.Name)
		var diffs []string
		if x.Digest != y.Digest {
			// The same bytes get different digests by server: CouchDB's is
			// the md5 of the gzip bytes it stores for compressible types,
			// PouchDB Server's that of the plain bytes. Compare what the
			// bytes are.
			if d := contentDiff(ctx, a, b, da, db, x, y); d != "" {
				diffs = append(diffs, d)
			}
		}
		if x.ContentType != y.ContentType {
			diffs = append(diffs, fmt.Sprintf("content_type a %q, b %q", x.ContentType, y.ContentType))
		}
		if x.Length != y.Length {
			diffs = append(diffs, fmt.Sprintf("length a %d, b %d", x.Length, y.Length))
		}
		if x.RevPos != y.RevPos && !(opts.LenientRevpos && (y.RevPos == gen && x.RevPos < gen || x.RevPos == gen && y.RevPos < gen)) {
			diffs = append(diffs, fmt.Sprintf("revpos a %d, b %d", x.RevPos, y.RevPos))
		}
		if len(diffs) > 0 {
			r.addf(KindAttachment, da.ID, da.Rev, "attachment %q: %s", x.Name, strings.Join(diffs, "; "))
		}
	}
	names := make([]string, 0, len(bs))
	for n := range bs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		r.addf(KindAttachment, da.ID, da.Rev, "attachment %q only in b", n)
	}
}

// contentDiff compares an attachment's decoded content on both sides;
// "" means equal.
func contentDiff(ctx context.Context, a, b replicate.Source, da, db *replicate.Doc, x, y *replicate.Attachment) string {
	sa, na, errA := plainSum(ctx, a, da, x)
	sb, nb, errB := plainSum(ctx, b, db, y)
	switch {
	case errA != nil || errB != nil:
		var why []string
		if errA != nil {
			why = append(why, fmt.Sprintf("a: %v", errA))
		}
		if errB != nil {
			why = append(why, fmt.Sprintf("b: %v", errB))
		}
		return fmt.Sprintf("digest a %s, b %s, and the content could not be read (%s)", x.Digest, y.Digest, strings.Join(why, "; "))
	case sa != sb || na != nb:
		return fmt.Sprintf("content differs: a %d bytes sha256 %x, b %d bytes sha256 %x", na, sa, nb, sb)
	}
	return ""
}

// plainSum gives the SHA-256 and size of one attachment's content,
// gzip-decoded when stored so: from the spool for an archive, else read
// from the source.
func plainSum(ctx context.Context, s replicate.Source, d *replicate.Doc, att *replicate.Attachment) ([32]byte, int64, error) {
	if sp, ok := s.(*Spooled); ok {
		return sp.content(d.ID, d.Rev, att.Name)
	}
	c := *att
	c.Data, c.Stub, c.Stream = nil, false, false
	if err := s.Attachment(ctx, d.ID, d.Rev, &c); err != nil {
		return [32]byte{}, 0, err
	}
	return hashPlain(bytes.NewReader(c.Data), c.Encoding)
}
