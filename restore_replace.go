package sofa

import (
	"context"
	"fmt"

	"github.com/sofadb/sofa/replicate"
)

// archivePart is one archive's part of a target database's restore: the
// group of that database in one archive of the chain, opened as a
// source.
type archivePart struct {
	path string // the archive, for errors
	open func(ctx context.Context) (replicate.Source, error)
}

// checkParts reads every part of the chain that restores target through,
// delivering nothing: each member's checksums, each record and each
// attachment's blob are checked as a restore would check them. --replace
// calls it before it deletes the existing database, so that a damaged
// part fails the database and leaves it as it was (the part is then read
// twice: once here, once restored). Nothing to check (no indexed parts):
// nil.
func (c *restorer) checkParts(ctx context.Context, target string) error {
	if c.parts == nil {
		return nil
	}
	for _, p := range c.parts(target) {
		src, err := p.open(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", p.path, err)
		}
		err = src.Changes(ctx, nil, func(replicate.Change) error { return nil })
		closeSource(src)
		if err != nil {
			// the restore's failure names the archive (p.path)
			return fmt.Errorf("%w (checked before --replace deleted anything: the database is as it was)", err)
		}
	}
	return nil
}
