package verify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sofadb/sofa/replicate"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxDifferences = 100
	DefaultFetchBatch     = 100
)

// Options tune Compare. The zero value is a Cheap comparison of documents
// only that lists up to DefaultMaxDifferences differences.
type Options struct {
	Mode Mode
	// Metadata also compares `_security` and `_revs_limit`.
	Metadata bool
	// Partitioned also compares the databases' partitioned property
	// (props.partitioned; PouchDB Server's databases are never
	// partitioned).
	Partitioned bool
	// AllowExtra accepts B holding more than A: documents and leaf
	// revisions only in B are not differences, and counts differ only when
	// B has fewer. For checking a copy into a target that may hold other
	// data. The winner's deleted state is then compared only where the
	// leaf sets are equal.
	AllowExtra bool
	// LenientRevpos accepts, on either side, an attachment revpos equal to the
	// generation of the revision that carries it: PouchDB Server resets
	// revpos so whenever it receives attachment bytes, so a copy there
	// cannot keep an older revpos.
	LenientRevpos bool
	// DoubleNumbers compares numbers as IEEE 754 doubles only: set when
	// either side is a JavaScript server (PouchDB Server holds every
	// number as a double). False also compares integers of 16 digits or
	// more exactly, as CouchDB and archives keep them.
	DoubleNumbers bool
	// MaxDifferences caps Report.Differences (Total still counts all).
	// Zero means DefaultMaxDifferences.
	MaxDifferences int
	// FetchBatch is the number of leaf revisions per FetchRevs call in
	// Full mode. Zero means DefaultFetchBatch.
	FetchBatch int

	revsLimitA, revsLimitB int // _revs_limit of each side; 0: unknown
}

// entry is what Compare keeps per document id of A.
type entry struct {
	leaves  []string // sorted; after B's row: the leaves both hold
	deleted bool     // A's winner is a tombstone
	seenB   bool
}

// Compare compares database a with database b (see the package comment).
// Differences go into the Report; the error is for failures to read
// either side (context cancellation included), and a report that came
// with an error is incomplete. A side that does not exist while the
// other does gives one KindNoDatabase difference and no error; both
// missing is an error wrapping replicate.ErrNotFound.
func Compare(ctx context.Context, a, b replicate.Source, opts Options) (*Report, error) {
	if opts.MaxDifferences <= 0 {
		opts.MaxDifferences = DefaultMaxDifferences
	}
	if opts.FetchBatch <= 0 {
		opts.FetchBatch = DefaultFetchBatch
	}
	r := &Report{Mode: opts.Mode.String(), max: opts.MaxDifferences, Differences: []Difference{}}
	ai, err := a.Info(ctx)
	if errors.Is(err, replicate.ErrNotFound) {
		bi, berr := b.Info(ctx)
		if berr != nil {
			return r, fmt.Errorf("verify: a: %w", err)
		}
		r.B = Counts{DocCount: bi.DocCount, DelCount: bi.DelCount, DelCountUnknown: bi.DelCountUnknown}
		r.addf(KindNoDatabase, "", "", "the database %q is compared with a database that does not exist: %v", bi.Name, err)
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("verify: a: %w", err)
	}
	r.A = Counts{DocCount: ai.DocCount, DelCount: ai.DelCount, DelCountUnknown: ai.DelCountUnknown}
	bi, err := b.Info(ctx)
	if errors.Is(err, replicate.ErrNotFound) {
		// Named by b's own error (its URL or archive member), not by a's
		// name: the pair is a's, the missing database b's.
		r.addf(KindNoDatabase, "", "", "the database compared with %q does not exist: %v", ai.Name, err)
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("verify: b: %w", err)
	}
	r.B = Counts{DocCount: bi.DocCount, DelCount: bi.DelCount, DelCountUnknown: bi.DelCountUnknown}
	_, aFeed := a.(feedCounter)
	_, bFeed := b.(feedCounter)
	if !aFeed && !bFeed {
		r.compareCounts(opts)
	}

	docs, err := readA(ctx, a)
	if err != nil {
		return r, err
	}
	r.Docs = int64(len(docs))
	if err := compareB(ctx, b, docs, r, opts); err != nil {
		return r, err
	}
	if aFeed || bFeed {
		r.A = feedCounts(a, r.A)
		r.B = feedCounts(b, r.B)
		r.compareCounts(opts)
	}
	ids := make([]string, 0, len(docs))
	for id, e := range docs {
		if !e.seenB {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		r.addf(KindMissing, id, "", "%d leaf revisions only in a", len(docs[id].leaves))
	}

	if opts.Mode == Full {
		// A history shorter than the other side's is only a stemmed one
		// when it is as long as its database's _revs_limit.
		if m, err := a.Metadata(ctx); err == nil {
			opts.revsLimitA = m.RevsLimit
		}
		if m, err := b.Metadata(ctx); err == nil {
			opts.revsLimitB = m.RevsLimit
		}
		if err := compareLeaves(ctx, a, b, docs, r, opts); err != nil {
			return r, err
		}
	}
	if opts.Metadata {
		if err := compareMetadata(ctx, ai.Name, a, b, r); err != nil {
			return r, err
		}
	}
	if opts.Partitioned && ai.Partitioned != bi.Partitioned {
		r.addf(KindPartitioned, "", "", "a partitioned: %t, b partitioned: %t", ai.Partitioned, bi.Partitioned)
	}
	return r, nil
}

// feedCounter is a side whose counts are those of the revisions its feed
// delivered (Spooled: an archive's records), known once its feed is read.
type feedCounter interface {
	FeedCounts() (docs, deleted int64)
}

// feedCounts returns s's counts from its feed when it has them, else c.
func feedCounts(s replicate.Source, c Counts) Counts {
	if f, ok := s.(feedCounter); ok {
		c.DocCount, c.DelCount = f.FeedCounts()
	}
	return c
}

// compareCounts reports a difference of the two sides' counts.
func (r *Report) compareCounts(opts Options) {
	if countsDiffer(r.A, r.B, opts.AllowExtra) {
		r.addf(KindDocCount, "", "", "a has %d documents (%d deleted), b %d (%d deleted)",
			r.A.DocCount, r.A.DelCount, r.B.DocCount, r.B.DelCount)
	}
}

// countsDiffer compares what both sides report: doc_del_count only when
// both report it (PouchDB Server does not; its absence is not a zero).
func countsDiffer(a, b Counts, allowExtra bool) bool {
	if a.DelCountUnknown || b.DelCountUnknown {
		if allowExtra {
			return b.DocCount < a.DocCount
		}
		return a.DocCount != b.DocCount
	}
	if allowExtra {
		return b.DocCount+b.DelCount < a.DocCount+a.DelCount
	}
	return a != b
}

// readA reads A's feed into one entry per id; a repeated row (a feed
// resumed after a broken connection) replaces the earlier one.
func readA(ctx context.Context, a replicate.Source) (map[string]*entry, error) {
	docs := map[string]*entry{}
	err := a.Changes(ctx, nil, func(c replicate.Change) error {
		docs[c.ID] = &entry{leaves: sortedSet(c.Revs), deleted: c.Deleted}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify: a: %w", err)
	}
	return docs, nil
}

// compareB reads B's feed and compares each row with A's entry, leaving in
// the entry the leaves both hold.
func compareB(ctx context.Context, b replicate.Source, docs map[string]*entry, r *Report, opts Options) error {
	extra := map[string]bool{}
	// With AllowExtra, a leaf of A that B does not hold as a leaf may
	// be in B's revision tree below B's own later revisions: asked of B
	// (`_revs_diff`) once its feed is read (heldBelow).
	below := map[string][]string{}
	err := b.Changes(ctx, nil, func(c replicate.Change) error {
		e, ok := docs[c.ID]
		if !ok {
			if !opts.AllowExtra && !extra[c.ID] {
				extra[c.ID] = true
				r.addf(KindExtra, c.ID, "", "%d leaf revisions only in b", len(c.Revs))
			}
			return nil
		}
		if e.seenB {
			return nil // a resumed feed repeats a row
		}
		e.seenB = true
		bl := sortedSet(c.Revs)
		var common []string
		same := true
		for _, rev := range e.leaves {
			if _, found := slices.BinarySearch(bl, rev); found {
				common = append(common, rev)
				continue
			}
			same = false
			if opts.AllowExtra {
				below[c.ID] = append(below[c.ID], rev)
			} else {
				r.addf(KindMissingRev, c.ID, rev, "leaf revision only in a")
			}
		}
		for _, rev := range bl {
			if _, found := slices.BinarySearch(e.leaves, rev); !found {
				same = false
				if !opts.AllowExtra {
					r.addf(KindExtraRev, c.ID, rev, "leaf revision only in b")
				}
			}
		}
		if e.deleted != c.Deleted && (same || !opts.AllowExtra) {
			r.addf(KindDeleted, c.ID, "", "winner deleted in a: %t, in b: %t", e.deleted, c.Deleted)
		} else if e.deleted != c.Deleted {
			r.otherWinner(c.ID)
		}
		e.leaves = common
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: b: %w", err)
	}
	return heldBelow(ctx, b, below, r)
}

// revsDiffer is a B that says which revisions it lacks (a CouchDB or
// PouchDB Server database: `_revs_diff`).
type revsDiffer interface {
	RevsDiff(ctx context.Context, revs map[string][]string) (map[string]replicate.Missing, error)
}

// heldBelow reports the leaves of A in revs (by id) that B lacks by its
// own `_revs_diff`. B holding one in its revision tree, below revisions
// of its own, is B holding more than A (AllowExtra), not a difference:
// a copy of A into B would not write it again. A B that cannot say lacks
// them all. Their bodies are not compared.
func heldBelow(ctx context.Context, b replicate.Source, revs map[string][]string, r *Report) error {
	if len(revs) == 0 {
		return nil
	}
	lacks := func(string, string) bool { return true }
	if rd, ok := b.(revsDiffer); ok {
		missing, err := rd.RevsDiff(ctx, revs)
		if err != nil {
			return fmt.Errorf("verify: b: %w", err)
		}
		lacks = func(id, rev string) bool { return slices.Contains(missing[id].Missing, rev) }
	}
	for _, id := range slices.Sorted(maps.Keys(revs)) {
		for _, rev := range revs[id] {
			if lacks(id, rev) {
				r.addf(KindMissingRev, id, rev, "leaf revision only in a")
			}
		}
	}
	return nil
}

// sortedSet returns revs sorted without duplicates, in a new slice.
func sortedSet(revs []string) []string {
	out := slices.Clone(revs)
	slices.Sort(out)
	return slices.Compact(out)
}
