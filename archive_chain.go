package sofa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
)

// The source side of a copy of archives into a new archive (a backup
// from an archive, a restore of a chain into an archive): each database
// is one replicate.Source over its groups in the chain's archives, read
// in chain order, so that the new archive holds it as one group (an
// archive holds each database once) through the one per-database job.

// chainStep is one group of a database in one archive of a chain.
type chainStep struct {
	x    *archive.Index
	g    archive.Group
	path string // the archive's location, for messages
	// checkpoints are the group's as the archive's manifest holds them
	// (its end member holds none).
	checkpoints map[string]json.RawMessage
}

// chainServer is a replicate.SourceServer whose databases are the steps
// of a chain, by the name they get in the new archive (a restore's
// --rename): every OpenSource reads them again from their offsets.
type chainServer struct {
	names []string
	steps map[string][]chainStep
}

var _ replicate.SourceServer = (*chainServer)(nil)

// AllDBs lists the databases in the order the chain's archives hold them
// (no paging).
func (s *chainServer) AllDBs(ctx context.Context, startAfter string, limit int) ([]string, error) {
	return s.names, nil
}

// ServerCaps: read-only, groups read at their offsets, several at once,
// each once per OpenSource (as archive.Index).
func (s *chainServer) ServerCaps() replicate.ServerCaps {
	return replicate.ServerCaps{Seek: true, ReadOnce: true}
}

// OpenSource returns the chain of database name (a *chainSource);
// replicate.ErrNotFound when no archive holds it.
func (s *chainServer) OpenSource(ctx context.Context, name string, readOnly bool) (replicate.Source, error) {
	st, ok := s.steps[name]
	if !ok || len(st) == 0 {
		return nil, replicate.ErrNotFound
	}
	return &chainSource{steps: st}, nil
}

// chainSource is one database of a chain as one Source: Changes streams
// the revisions of each group in chain order (seqs are ordinals across
// the groups: 1, 2, ...), leaving out those a later group replaced (see
// laterRevisions), so that the new archive holds the leaves a restore of
// the chain leaves on a server. Info and Metadata are the last group's (the database as
// the last backup found it). Changes can be called once, from the start.
type chainSource struct {
	steps []chainStep
	info  *replicate.DBInfo
	meta  replicate.Metadata
	// end is the last group's summary once every group was read, its
	// Error those of every group not whole; read says it was.
	end  archive.DBSummary
	read bool
}

var _ replicate.Source = (*chainSource)(nil)

// Info is the last group's (archive.DBReader.Info): the source's counts
// and state when the last backup of the chain started.
func (c *chainSource) Info(ctx context.Context) (replicate.DBInfo, error) {
	if c.info != nil {
		return *c.info, nil
	}
	last := c.steps[len(c.steps)-1]
	dbr, err := last.x.OpenDB(last.g)
	if err != nil {
		return replicate.DBInfo{}, fmt.Errorf("%s: %w", last.path, err)
	}
	defer dbr.Close()
	info, err := dbr.Info(ctx)
	if err != nil {
		return info, err
	}
	if c.meta, err = dbr.Metadata(ctx); err != nil {
		return info, err
	}
	c.info = &info
	return info, nil
}

// Metadata is the last group's metadata as its meta member holds it.
func (c *chainSource) Metadata(ctx context.Context) (replicate.Metadata, error) {
	if _, err := c.Info(ctx); err != nil {
		return replicate.Metadata{}, err
	}
	return c.meta, nil
}

// GetLocal returns replicate.ErrNotFound: an archive keeps no `_local`
// documents of its own.
func (c *chainSource) GetLocal(ctx context.Context, id string) ([]byte, error) {
	return nil, replicate.ErrNotFound
}

// PutLocal returns replicate.ErrReadOnly.
func (c *chainSource) PutLocal(ctx context.Context, id string, body []byte) error {
	return replicate.ErrReadOnly
}

// FetchRevs returns archive.ErrNoFeed: revisions arrive with the feed.
func (c *chainSource) FetchRevs(ctx context.Context, reqs []replicate.RevRequest) ([]*replicate.Doc, []replicate.DocError, error) {
	return nil, nil, &archive.Error{Err: archive.ErrNoFeed}
}

// Attachment returns archive.ErrNoFeed: attachment bytes arrive with the
// feed.
func (c *chainSource) Attachment(ctx context.Context, docID, rev string, att *replicate.Attachment) error {
	return &archive.Error{Err: archive.ErrNoFeed}
}

// Changes reads every group of the chain in order, from the start (since
// empty or "0"; a chain is read whole, the new archive holding no
// checkpoint to resume from), calling fn for every Change with its seq
// made an ordinal across the groups. It returns fn's error as is and an
// *archive.Error of a damaged group prefixed with the archive's location.
func (c *chainSource) Changes(ctx context.Context, since replicate.Seq, fn func(replicate.Change) error) error {
	if s := since.String(); s != "" && s != "0" {
		return fmt.Errorf("archive chain: since %q: a chain is read from its start", s)
	}
	if c.read {
		return fmt.Errorf("archive chain: already read (open it again)")
	}
	later, err := c.laterRevisions(ctx)
	if err != nil {
		return err
	}
	var offset int64
	var notWhole []string
	for step, st := range c.steps {
		dbr, err := st.x.OpenDB(st.g)
		if err != nil {
			return fmt.Errorf("%s: %w", st.path, err)
		}
		var last int64
		err = dbr.Changes(ctx, nil, func(ch replicate.Change) error {
			if n, err := strconv.ParseInt(ch.Seq.String(), 10, 64); err == nil {
				last = n
				ch.Seq = replicate.Seq(strconv.FormatInt(offset+n, 10))
			}
			ch, ok := later.leavesOnly(step, ch)
			if !ok {
				return nil // every revision replaced later in the chain
			}
			return fn(ch)
		})
		s, ok := dbr.Summary()
		dbr.Close()
		if err != nil {
			if ae := (*archive.Error)(nil); errors.As(err, &ae) {
				return fmt.Errorf("%s: %w", st.path, err)
			}
			return err
		}
		if !ok {
			return fmt.Errorf("%s: the group of %s was not read to its end", st.path, st.g.Name)
		}
		if s.Error != "" {
			notWhole = append(notWhole, fmt.Sprintf("%s: %s", st.path, s.Error))
		} else {
			// a whole group continues from the checkpoint the ones
			// before it reached (or holds the database whole)
			notWhole = nil
		}
		offset += last
		s.Checkpoints = st.checkpoints
		c.end = s
	}
	c.end.Error = strings.Join(notWhole, "; ")
	c.read = true
	return nil
}

// Summary is the last group's summary (its seq reached, and the
// checkpoints its archive's manifest holds) with, as Error, why the
// groups after the chain's last whole one are not whole (a whole group
// continues from the checkpoint the groups before it reached); ok once
// Changes read every group.
func (c *chainSource) Summary() (archive.DBSummary, bool) {
	return c.end, c.read
}
