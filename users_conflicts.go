package sofa

import (
	"context"
	"fmt"
	"strings"

	"github.com/sofadb/sofa/couch"
)

// maxNamedConflicts caps the user documents a conflict warning names.
const maxNamedConflicts = 10

// warnUserConflicts warns, after a copy into a server's `_users` that held
// documents before, of the user documents it left with conflicts (a
// revision of the source's beside another of the target's): CouchDB
// refuses those users' logins until the conflicts are resolved.
func warnUserConflicts(ctx context.Context, c *dbCopy) {
	if c.task.Target != couch.UsersDB || !c.target.Reused || c.target.InfoRead == nil {
		return
	}
	tdb, ok := c.target.Target.(*couch.DB)
	if !ok {
		return
	}
	ids, err := tdb.ConflictedSince(ctx, c.target.InfoRead.UpdateSeq)
	if err != nil {
		c.warn(fmt.Sprintf("could not look for user documents left with conflicts: %v", err))
		return
	}
	if len(ids) == 0 {
		return
	}
	named := ids[:min(len(ids), maxNamedConflicts)]
	more := ""
	if len(ids) > len(named) {
		more = fmt.Sprintf(" and %d more", len(ids)-len(named))
	}
	c.warn(fmt.Sprintf("%d user %s now %s conflicts (the target held other revisions of %s), and CouchDB refuses %s logins until they are resolved: %s%s",
		len(ids), plural(int64(len(ids)), "document"), pick(len(ids) == 1, "has", "have"), pick(len(ids) == 1, "it", "them"),
		pick(len(ids) == 1, "that user's", "those users'"), strings.Join(named, ", "), more))
}

func pick(one bool, a, b string) string {
	if one {
		return a
	}
	return b
}
