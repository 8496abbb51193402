package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sofadb/sofa"
)

// printDeletedSince says which databases of the previous archive prev an
// incremental backup into label does not hold, being deleted at the
// source since (sofa.Summary.DeletedSincePrevious): one line each, or
// past five one line with their count and the first five.
func printDeletedSince(w io.Writer, names []string, prev, label string) {
	prev = escapeControls(sofa.Redact(prev))
	label = escapeControls(label)
	if len(names) <= 5 {
		for _, n := range names {
			fmt.Fprintf(w, "sofa: database %q of %s is not in %s: deleted at the source since; a restore of the chain leaves it out (restore the archives up to %s to get it back)\n", n, prev, label, prev)
		}
		return
	}
	shown := make([]string, 5)
	for i, n := range names[:5] {
		shown[i] = strconv.Quote(n)
	}
	fmt.Fprintf(w, "sofa: %d databases of %s are not in %s: deleted at the source since (%s, ...); a restore of the chain leaves them out (restore the archives up to %s to get them back)\n", len(names), prev, label, strings.Join(shown, ", "), prev)
}
