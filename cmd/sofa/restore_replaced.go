package main

import (
	"fmt"
	"os"

	"github.com/sofadb/sofa/fleet"
)

// replacingLine is the line restore --replace prints before it deletes a
// target database: what the database holds (GET /db), e.g.
// `replacing "db" on the target: deleting it (12 documents, 3 deleted)`.
func replacingLine(r fleet.Replaced) string {
	held := plural(r.DocCount, "document")
	if r.DocDelCount != nil {
		held += fmt.Sprintf(", %d deleted", *r.DocDelCount)
	} else {
		held += "; the server does not report its deleted ones"
	}
	return fmt.Sprintf("replacing %q on the target: deleting it (%s)", r.Name, held)
}

// printReplacing prints replacingLine on stderr unless quiet.
func printReplacing(quiet bool) func(fleet.Replaced) {
	return func(r fleet.Replaced) {
		if !quiet {
			fmt.Fprintf(os.Stderr, "sofa: %s\n", escapeControls(replacingLine(r)))
		}
	}
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
