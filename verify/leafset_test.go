package verify

import (
	"slices"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// TestLeafSet: records of one document's revisions, in any order, leave
// the leaves of the tree they make; a conflict's branches both stay.
func TestLeafSet(t *testing.T) {
	doc := func(rev string, del bool, ids ...string) *replicate.Doc {
		return &replicate.Doc{ID: "x", Rev: rev, Deleted: del, Revisions: replicate.Revisions{Start: revGen(rev), IDs: ids}}
	}
	a1 := doc("1-a", false, "a")
	b2 := doc("2-b", false, "b", "a")
	c3 := doc("3-c", true, "c", "b", "a")
	k2 := doc("2-k", false, "k", "a") // a conflicting branch
	for _, tc := range []struct {
		name    string
		in      []*replicate.Doc
		want    []string
		deleted bool
	}{
		{"older first", []*replicate.Doc{a1, b2}, []string{"2-b"}, false},
		{"newer first", []*replicate.Doc{b2, a1}, []string{"2-b"}, false},
		{"three, middle last", []*replicate.Doc{a1, c3, b2}, []string{"3-c"}, true},
		{"a conflict", []*replicate.Doc{a1, b2, k2}, []string{"2-b", "2-k"}, false},
		{"a conflict, then a tombstone on one branch", []*replicate.Doc{k2, c3, b2}, []string{"2-k", "3-c"}, false},
		{"the same revision twice", []*replicate.Doc{b2, b2}, []string{"2-b"}, false},
		{"a stemmed history", []*replicate.Doc{a1, doc("3-c", false, "c", "b")}, []string{"1-a", "3-c"}, false},
	} {
		byRev := map[string]*replicate.Doc{}
		var e leafSet
		for _, d := range tc.in {
			byRev[d.Rev] = d
			if err := e.add(d, func(id, rev string) (replicate.Revisions, error) { return byRev[rev].Revisions, nil }); err != nil {
				t.Fatal(err)
			}
		}
		revs, del := e.list()
		slices.Sort(revs)
		if !slices.Equal(revs, tc.want) || del != tc.deleted {
			t.Errorf("%s: leaves %v deleted %t, want %v %t", tc.name, revs, del, tc.want, tc.deleted)
		}
	}
}
