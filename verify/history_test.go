package verify

import (
	"strings"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// historyDiff: a shorter history is a stemmed one only when its own
// _revs_limit explains it and is not below the other side's (a copy into
// a database of a lower _revs_limit lost history: conformance R3).
func TestHistoryDiff_Stemmed(t *testing.T) {
	long := replicate.Revisions{Start: 5, IDs: []string{"e", "d", "c", "b", "a"}}
	short := replicate.Revisions{Start: 5, IDs: []string{"e", "d"}}
	for _, c := range []struct {
		name       string
		a, b       replicate.Revisions
		limA, limB int
		want       string // "" equal, else a part of the difference
	}{
		{"equal", long, long, 1000, 1000, ""},
		{"b stemmed at its limit, a's not higher", long, short, 2, 2, ""},
		{"b stemmed, a's limit unknown", long, short, 0, 2, ""},
		{"b at a lower limit than a's", long, short, 1000, 2, "b's _revs_limit 2 is below a's 1000"},
		{"a at a lower limit than b's", short, long, 2, 1000, "a's _revs_limit 2 is below b's 1000"},
		{"b shorter than its limit", long, short, 1000, 1000, "b's _revs_limit does not explain it"},
		{"b shorter, limit unknown", long, short, 1000, 0, "b's _revs_limit does not explain it"},
		{"another ancestor", long, replicate.Revisions{Start: 5, IDs: []string{"e", "x"}}, 2, 2, "ancestor at generation 4"},
	} {
		got := historyDiff(c.a, c.b, c.limA, c.limB)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if c.want != "" && !strings.HasPrefix(got, "ancestor") && !strings.HasPrefix(got, "history a ") {
			t.Errorf("%s: %q does not give a's count first", c.name, got)
		}
	}
}
