package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/sofadb/sofa"
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

// replaceInterrupted is what an interrupted restore --replace says a
// rerun does: with --replace, it deletes every selected database the
// target holds again (those this run restored too) and restores it from
// the start; without, it resumes the databases this run recreated from
// their checkpoints and refuses a non-empty one this run did not replace.
// It names the databases deleted and not restored completely ("again"
// only once this run deleted one).
func replaceInterrupted(sum *sofa.Summary) string {
	msg, again := "interrupted: ", ""
	if sum != nil && len(sum.Replaced) > 0 {
		again = " again (those restored too)"
		ok := map[string]bool{}
		for _, d := range sum.DBs {
			ok[d.Name] = d.Status == fleet.StatusOK
		}
		var cut []string
		for _, r := range sum.Replaced {
			if !ok[r.Name] {
				cut = append(cut, fmt.Sprintf("%q", r.Name))
			}
		}
		if len(cut) > 0 {
			if len(cut) > 3 {
				cut = append(cut[:3], fmt.Sprintf("%d more", len(cut)-3))
			}
			msg += fmt.Sprintf("--replace deleted %s and did not restore %s completely; ", strings.Join(cut, ", "), pronoun(len(cut)))
		}
	}
	return msg + "the same command run again deletes each selected database the target holds" + again + " and restores it from the start; run without --replace, it resumes the databases this run recreated from their checkpoints and refuses the non-empty ones it did not replace"
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
