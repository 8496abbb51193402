package sofa

import (
	"context"
	"errors"
	"fmt"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
)

// An archive's records are a database's leaf revisions. A chain's later
// archives hold the revisions that replaced leaves of the earlier ones
// (an edit, a deletion, a conflict's branch deleted): restored into a
// server those earlier leaves become ancestors (`new_edits=false` merges
// the histories), but copied into an archive they would stay records,
// leaves they no longer are. The chain's copy into an archive leaves out
// every revision that a record of a later group lists in its history.

// laterHistory is the revision history of one record of the chain's
// group step.
type laterHistory struct {
	step  int
	start int
	ids   []string
}

// covers reports whether rev ("N-hash") is the record's revision or an
// ancestor its history lists.
func (h laterHistory) covers(rev string) bool {
	gen, hash := splitRev(rev)
	k := h.start - gen
	return gen > 0 && k >= 0 && k < len(h.ids) && h.ids[k] == hash
}

// laterRevisions maps a document id to the histories of its records in
// the chain's groups after the first.
type laterRevisions map[string][]laterHistory

// replaced reports whether revision d of group step is replaced in a
// later group (or stored there again).
func (l laterRevisions) replaced(step int, d *replicate.Doc) bool {
	for _, h := range l[d.ID] {
		if h.step > step && h.covers(d.Rev) {
			return true
		}
	}
	return false
}

// laterRevisions reads the groups after the first for the histories of
// their records (nil for a chain of one group). Memory: every record's
// history of those groups, which are incremental ones.
func (c *chainSource) laterRevisions(ctx context.Context) (laterRevisions, error) {
	if len(c.steps) < 2 {
		return nil, nil
	}
	l := laterRevisions{}
	for step := 1; step < len(c.steps); step++ {
		st := c.steps[step]
		dbr, err := st.x.OpenDB(st.g)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.path, err)
		}
		err = dbr.Changes(ctx, nil, func(ch replicate.Change) error {
			for _, d := range ch.Docs {
				h := laterHistory{step: step, start: d.Revisions.Start, ids: d.Revisions.IDs}
				if len(h.ids) == 0 {
					gen, hash := splitRev(d.Rev)
					h.start, h.ids = gen, []string{hash}
				}
				l[d.ID] = append(l[d.ID], h)
			}
			return nil
		})
		dbr.Close()
		if ae := (*archive.Error)(nil); errors.As(err, &ae) {
			return nil, fmt.Errorf("%s: %w", st.path, err)
		} else if err != nil {
			return nil, err
		}
	}
	return l, nil
}

// leavesOnly drops from ch the revisions of group step that a later
// group replaced; ok false when none is left.
func (l laterRevisions) leavesOnly(step int, ch replicate.Change) (replicate.Change, bool) {
	if l == nil {
		return ch, true
	}
	var docs []*replicate.Doc
	for _, d := range ch.Docs {
		if !l.replaced(step, d) {
			docs = append(docs, d)
		}
	}
	if len(docs) == len(ch.Docs) {
		return ch, true
	}
	if len(docs) == 0 {
		return ch, false
	}
	ch.Docs, ch.Revs, ch.Deleted = docs, nil, true
	for _, d := range docs {
		ch.Revs = append(ch.Revs, d.Rev)
		ch.Deleted = ch.Deleted && d.Deleted
	}
	return ch, true
}
