package main

import (
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// A failure of a whole database (a check's summary: no id, no rev) is
// said without an empty id="" rev=.
func TestFailureLine(t *testing.T) {
	for _, c := range []struct {
		f    replicate.DocError
		want string
	}{
		{replicate.DocError{ID: "a b", Rev: "1-x", Error: "forbidden", Reason: "no"}, `id="a b" rev=1-x: forbidden: no`},
		{replicate.DocError{Error: "verify", Reason: "3 more differences not listed"}, `verify: 3 more differences not listed`},
	} {
		if got := failureLine(c.f); got != c.want {
			t.Errorf("failureLine(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
}
