package replicate

import (
	"context"
	"errors"
	"time"

	"github.com/sofadb/sofa/internal/jsonx"
)

// followMetadata runs until ctx ends in a continuous run that copies
// metadata: every MetadataInterval it reads the source's metadata
// (Source.Metadata: `_security` and `_revs_limit` on CouchDB, which
// announces their changes in no feed) and writes what changed since the
// last read to the target: `_revs_limit` as before documents, `_security`
// as after them (Target.SetMetadata). last is what the target was given
// at the catch-up. A failed read or write is logged and tried again at
// the next tick; a refused one (ErrMetadataRefused) is warned of once.
func (r *run) followMetadata(ctx context.Context, last Metadata) {
	t := time.NewTicker(r.opts.MetadataInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, err := r.src.Metadata(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.logf("source: read _security and _revs_limit: %v; trying again in %s", err, r.opts.MetadataInterval)
			}
			continue
		}
		if m.RevsLimit > 0 && m.RevsLimit != last.RevsLimit {
			if r.setMetadata(ctx, Metadata{RevsLimit: m.RevsLimit}, BeforeDocs, "_revs_limit") {
				last.RevsLimit = m.RevsLimit
			}
		}
		if len(m.Security) > 0 && !jsonx.Same(m.Security, last.Security) {
			if r.setMetadata(ctx, Metadata{Security: m.Security}, AfterDocs, "_security") {
				last.Security = m.Security
			}
		}
	}
}

// setMetadata writes one changed field of the source's metadata to the
// target and says whether it was written.
func (r *run) setMetadata(ctx context.Context, m Metadata, phase MetadataPhase, what string) bool {
	err := r.tgt.SetMetadata(ctx, m, phase)
	switch {
	case err == nil:
		r.logf("%s changed at the source: written to the target", what)
		return true
	case ctx.Err() != nil:
	case errors.Is(err, ErrMetadataRefused):
		r.warn("target: " + err.Error())
	default:
		r.logf("target: write %s: %v; trying again in %s", what, err, r.opts.MetadataInterval)
	}
	return false
}
