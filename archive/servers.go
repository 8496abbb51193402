package archive

import (
	"context"

	"github.com/sofadb/sofa/replicate"
)

// The archive's side of the server-level contract (replicate.Server): an
// Index is a SourceServer (every group read at its offset, several at
// once), a Writer a TargetServer (each database opened as a target is a
// group of the archive).

var (
	_ replicate.SourceServer = (*Index)(nil)
	_ replicate.TargetServer = (*Writer)(nil)
)

// AllDBs lists the archive's databases in archive order (no paging: every
// name at once).
func (x *Index) AllDBs(ctx context.Context, startAfter string, limit int) ([]string, error) {
	names := make([]string, 0, len(x.groups))
	for _, g := range x.groups {
		names = append(names, g.Name)
	}
	return names, nil
}

// ServerCaps: an archive being read is read-only and keeps no
// checkpoint; its groups can be read at once, each once per OpenSource.
func (x *Index) ServerCaps() replicate.ServerCaps {
	return replicate.ServerCaps{Seek: true, ReadOnce: true}
}

// OpenSource opens the group of database name (OpenDB); the Source is a
// *DBReader, Close it when done.
func (x *Index) OpenSource(ctx context.Context, name string, readOnly bool) (replicate.Source, error) {
	for _, g := range x.groups {
		if g.Name == name {
			return x.OpenDB(g)
		}
	}
	return nil, replicate.ErrNotFound
}

// AllDBs: an archive being written lists none (each database is written
// once).
func (w *Writer) AllDBs(ctx context.Context, startAfter string, limit int) ([]string, error) {
	return nil, nil
}

// ServerCaps: an archive being written keeps its checkpoints in its
// manifest, for the next incremental backup, not for a rerun; it cannot
// be read back while written, but each group counts the revisions it
// stored (DBWriter.Stored).
func (w *Writer) ServerCaps() replicate.ServerCaps {
	return replicate.ServerCaps{StoredCounts: true}
}

// CreateDB does nothing: a database's group starts when it is opened as
// a target.
func (w *Writer) CreateDB(ctx context.Context, name string, o replicate.CreateOptions) error {
	return nil
}

// OpenTarget starts the group of database name (Database); the Target is
// a *DBWriter, to Close (or Abort) when its copy ends.
func (w *Writer) OpenTarget(ctx context.Context, name string, created bool) (replicate.Target, error) {
	return w.Database(name)
}
