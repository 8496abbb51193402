package sofa

import (
	"fmt"
	"slices"
)

// One target database takes one source database. Two selected databases
// that would be written into one are refused before anything is written
// (an *OptionError naming both and the target): two renames to one name,
// a rename onto the name of another selected database kept under its
// own, or two names the target server keeps as one (storedAs). Restore
// (every target: server, archive, stdin read once), Copy and Sync check
// it here.

// storedAs is a target server that may keep two database names as one
// database (couch.Server.StoredAs: PouchDB Server drops "/").
type storedAs interface{ StoredAs(name string) string }

// targetUse is a source database and the target name it is written
// under.
type targetUse struct{ source, target string }

// targetNames holds the target database of each source database of a
// run, to refuse a second source written into one.
type targetNames struct {
	ts      storedAs          // nil: names are kept as given (an archive)
	renames map[string]string // OLD=NEW
	verb    string            // "restored", "copied"
	used    map[string]targetUse
}

// newTargetNames returns the names of a run into ts (a target server: a
// couch.Server is asked StoredAs; any other keeps names as given) with
// renames (nil: none); verb says what is done to a database.
func newTargetNames(ts any, renames map[string]string, verb string) *targetNames {
	s, _ := ts.(storedAs)
	return &targetNames{ts: s, renames: renames, verb: verb, used: map[string]targetUse{}}
}

// target is the name source is written under: its rename, or its own.
func (n *targetNames) target(source string) string {
	if nu, ok := n.renames[source]; ok {
		return nu
	}
	return source
}

// stored is the database the target server keeps name as.
func (n *targetNames) stored(name string) string {
	if n.ts == nil {
		return name
	}
	return n.ts.StoredAs(name)
}

// add records source; an *OptionError when another source is written
// into the same target database (the same source again is no error: a
// chain's archives).
func (n *targetNames) add(source string) error {
	u := targetUse{source: source, target: n.target(source)}
	key := n.stored(u.target)
	if prev, ok := n.used[key]; ok && prev.source != source {
		return n.clash(prev, u)
	}
	n.used[key] = u
	return nil
}

// clash is the error of a and b written into one target database.
func (n *targetNames) clash(a, b targetUse) error {
	if b.source < a.source {
		a, b = b, a
	}
	into := fmt.Sprintf("%q", a.target)
	if a.target != b.target {
		into = fmt.Sprintf("%q and %q, which the target server keeps as one database (%q)", a.target, b.target, n.stored(a.target))
	}
	hint := "leave one out (--exclude)"
	if n.renames != nil {
		hint = "give each its own name (--rename OLD=NEW) or leave one out (--exclude)"
	}
	return optionErr("databases %s and %s would both be %s into %s: one target database takes one source database; %s",
		n.describe(a), n.describe(b), n.verb, into, hint)
}

// describe names a source database, with its rename when it has one.
func (n *targetNames) describe(u targetUse) string {
	if nu, ok := n.renames[u.source]; ok {
		return fmt.Sprintf("%q (--rename %s=%s)", u.source, u.source, nu)
	}
	return fmt.Sprintf("%q", u.source)
}

// distinctTargets refuses, with an *OptionError naming both source
// databases and the target, two of sources written into one target
// database of ts (see newTargetNames). sources are taken in sorted
// order, so the error is the same whatever their order.
func distinctTargets(ts any, renames map[string]string, verb string, sources []string) error {
	n := newTargetNames(ts, renames, verb)
	for _, s := range slices.Sorted(slices.Values(sources)) {
		if err := n.add(s); err != nil {
			return err
		}
	}
	return nil
}
