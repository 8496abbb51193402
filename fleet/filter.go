package fleet

import (
	"fmt"
	"path"
	"strings"
)

// ReplicateSkip lists the system databases `sofa replicate` leaves out
// unless asked: _replicator (replication jobs of the source, which would
// start running on the target), _global_changes, and _users (accounts and
// password hashes).
var ReplicateSkip = []string{"_replicator", "_global_changes", "_users"}

// BackupSkip lists the system databases `sofa backup` leaves out unless
// asked: only _global_changes. A backup keeps _users and _replicator so a
// restore can rebuild the server.
var BackupSkip = []string{"_global_changes"}

// SkipReason says why a database of ReplicateSkip or BackupSkip is left
// out by default and how to select it.
func SkipReason(name string) string {
	switch name {
	case "_replicator":
		return "a system database: its documents are replication jobs, which would start running on the target server; --include _replicator selects it"
	case "_global_changes":
		return "a system database: the server's own log of database changes; --include _global_changes selects it"
	case "_users":
		return "a system database: accounts and password hashes; --with-users selects it"
	}
	return "left out by the selection's Skip list"
}

// Filter selects databases by name.
//
// Patterns are shell-style globs on the whole name: `*` matches any run
// of characters except `/`, `?` one character except `/`, `[a-z]` a
// class, `[!a-z]` (or `[^a-z]`) any character not in it, a `-` first or
// last in a class and a `]` first stand for themselves, `\` escapes.
// CouchDB database names may contain `/` (e.g. "org/users"), so `org/*`
// matches "org/users" but `*` does not; write `*/*` for names with one
// slash.
type Filter struct {
	// Include keeps only names that match at least one pattern. Empty
	// means every name.
	Include []string
	// Exclude drops names that match any pattern; it wins over Include.
	Exclude []string
	// Skip lists names left out unless an Include pattern that begins with
	// "_" matches them: `--include _users` or `--include '_*'` asks for
	// them, `--include '*'` does not. Use ReplicateSkip or BackupSkip.
	Skip []string
}

// Validate reports the first malformed pattern.
func (f Filter) Validate() error {
	for _, p := range append(append([]string(nil), f.Include...), f.Exclude...) {
		if _, err := path.Match(pathPattern(p), ""); err != nil {
			return fmt.Errorf("bad pattern %q: %w", p, err)
		}
	}
	return nil
}

// Match reports whether the filter keeps name. Malformed patterns match
// nothing (call Validate first).
func (f Filter) Match(name string) bool {
	for _, p := range f.Exclude {
		if match(p, name) {
			return false
		}
	}
	skipped := false
	for _, s := range f.Skip {
		if s == name {
			skipped = true
			break
		}
	}
	if skipped {
		for _, p := range f.Include {
			if strings.HasPrefix(p, "_") && match(p, name) {
				return true
			}
		}
		return false
	}
	if len(f.Include) == 0 {
		return true
	}
	for _, p := range f.Include {
		if match(p, name) {
			return true
		}
	}
	return false
}

// Apply returns the names the filter keeps, in their order.
func (f Filter) Apply(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if f.Match(n) {
			out = append(out, n)
		}
	}
	return out
}

// MatchPattern reports whether the glob pattern (see Filter) matches
// name; a malformed pattern matches nothing.
func MatchPattern(pattern, name string) bool { return match(pattern, name) }

func match(pattern, name string) bool {
	ok, err := path.Match(pathPattern(pattern), name)
	return err == nil && ok
}

// pathPattern is the shell-style glob p in path.Match syntax: `[!` is
// `[^`, and a class's first `]` and its first or last `-` are escaped.
// An unterminated class stays so (path.Match refuses it).
func pathPattern(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			b.WriteString(p[i : i+2])
			i++
			continue
		}
		b.WriteByte(c)
		if c != '[' {
			continue
		}
		if i+1 < len(p) && (p[i+1] == '!' || p[i+1] == '^') {
			b.WriteByte('^')
			i++
		}
		start := i + 1
	class:
		for i++; i < len(p); i++ {
			d := p[i]
			switch {
			case d == '\\' && i+1 < len(p):
				b.WriteString(p[i : i+2])
				i++
			case d == ']' && i > start:
				b.WriteByte(']')
				break class
			case d == ']', d == '-' && (i == start || i+1 < len(p) && p[i+1] == ']'):
				b.WriteByte('\\')
				b.WriteByte(d)
			default:
				b.WriteByte(d)
			}
		}
	}
	return b.String()
}
