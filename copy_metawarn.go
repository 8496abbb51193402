package sofa

import (
	"context"
	"fmt"

	"github.com/sofadb/sofa/internal/jsonx"
	"github.com/sofadb/sofa/replicate"
)

// metadataReader reads a database's `_security` and `_revs_limit`
// (couch.DB).
type metadataReader interface {
	Metadata(ctx context.Context) (replicate.Metadata, error)
}

// metaBefore reads the `_security` and `_revs_limit` of a target
// database that held documents before the copy and that the copy did
// not create, claim or hold a checkpoint in (an existing database taken
// with ReuseExisting, or _users): a copy gives it the source's, and says
// what it replaced (warnMetaReplaced). nil: nothing to compare (another
// database, or one that cannot be read).
func metaBefore(ctx context.Context, c *dbCopy) *replicate.Metadata {
	if !c.target.Reused || c.target.Created || c.target.Claimed || c.target.Checkpoint != nil {
		return nil
	}
	mr, ok := c.target.Target.(metadataReader)
	if !ok {
		return nil
	}
	m, err := mr.Metadata(ctx)
	if err != nil {
		return nil
	}
	return &m
}

// metadataReplacer tells what its SetMetadata wrote over
// (couch.DB.MetadataReplaced).
type metadataReplacer interface {
	MetadataReplaced() (security []byte, revsLimit int)
}

// warnRerunReplaced warns, for a database metaBefore did not read (one
// an earlier run created or claimed), of the `_security` and
// `_revs_limit` the copy wrote the source's over because they had been
// changed on the target since (a last copy after a cut-over reverted
// them without a word).
func warnRerunReplaced(ctx context.Context, c *dbCopy) {
	mr, ok := c.target.Target.(metadataReplacer)
	if !ok {
		return
	}
	if sec, rl := mr.MetadataReplaced(); sec != nil || rl > 0 {
		warnMetaReplaced(ctx, c, replicate.Metadata{Security: sec, RevsLimit: rl})
	}
}

// warnMetaReplaced warns of what the copy changed of the target's
// `_security` (one that named someone, replaced by another) and
// `_revs_limit` (lowered) since before.
func warnMetaReplaced(ctx context.Context, c *dbCopy, before replicate.Metadata) {
	now, err := c.target.Target.(metadataReader).Metadata(ctx)
	if err != nil {
		return
	}
	if len(before.Security) > 0 && !openSecurity(before.Security) && !jsonx.Same(before.Security, now.Security) {
		c.warn(fmt.Sprintf("_security replaced by the source's %s; the database had %s (whom only that gave access has lost it)", compactSecurity(now.Security), compactSecurity(before.Security)))
	}
	if now.RevsLimit > 0 && before.RevsLimit > now.RevsLimit {
		c.warn(fmt.Sprintf("_revs_limit lowered to the source's %d (the database had %d): compaction now keeps at most %d revisions of each document's history", now.RevsLimit, before.RevsLimit, now.RevsLimit))
	}
}
