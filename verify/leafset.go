package verify

import (
	"strconv"
	"strings"

	"github.com/sofadb/sofa/replicate"
)

// leafSet is the leaves of one document's revision tree as built from
// separate records of its revisions (an archive's): a revision listed in
// another record's history is not a leaf.
type leafSet struct {
	revs []string
	dels []bool
}

// add takes revision d into the set. A leaf in d's history leaves the
// set; d does not enter it when it is in the history of a leaf already
// held, which history(id, rev) reads back (asked only of leaves of a
// later generation than d's).
func (e *leafSet) add(d *replicate.Doc, history func(id, rev string) (replicate.Revisions, error)) error {
	for i, rev := range e.revs {
		if rev == d.Rev {
			e.dels[i] = e.dels[i] && d.Deleted
			return nil
		}
	}
	gen := revGen(d.Rev)
	for _, rev := range e.revs {
		if revGen(rev) <= gen {
			continue
		}
		h, err := history(d.ID, rev)
		if err != nil {
			return err
		}
		if inHistory(h, d.Rev) {
			return nil // an ancestor of a leaf held
		}
	}
	kept := e.revs[:0]
	keptDels := e.dels[:0]
	for i, rev := range e.revs {
		if rev != d.Rev && inHistory(d.Revisions, rev) {
			continue // superseded by d
		}
		kept = append(kept, rev)
		keptDels = append(keptDels, e.dels[i])
	}
	e.revs = append(kept, d.Rev)
	e.dels = append(keptDels, d.Deleted)
	return nil
}

// list returns a copy of the leaves and whether all of them are deleted.
func (e *leafSet) list() ([]string, bool) {
	return append([]string(nil), e.revs...), e.deleted()
}

// deleted says whether every leaf is deleted.
func (e *leafSet) deleted() bool {
	for _, d := range e.dels {
		if !d {
			return false
		}
	}
	return true
}

// revGen is the generation of a revision "N-hash"; 0 if it has none.
func revGen(rev string) int {
	n, _, ok := strings.Cut(rev, "-")
	if !ok {
		return 0
	}
	g, err := strconv.Atoi(n)
	if err != nil {
		return 0
	}
	return g
}

// inHistory says whether rev is in the revision history h (the
// revision itself included).
func inHistory(h replicate.Revisions, rev string) bool {
	gen := revGen(rev)
	i := h.Start - gen
	if gen <= 0 || i < 0 || i >= len(h.IDs) {
		return false
	}
	_, hash, _ := strings.Cut(rev, "-")
	return h.IDs[i] == hash
}
