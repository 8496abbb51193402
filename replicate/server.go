package replicate

import (
	"context"
	"errors"
)

// The server-level contract: an endpoint of many databases as a whole (a
// CouchDB server, an archive), next to Source and Target, which are one
// database. The many-database operations (package sofa: Copy, Backup,
// Restore) list, create and open databases through it and ask ServerCaps what
// the endpoint supports, never what kind it is.
//
// Implemented by couch.Server (both sides), archive.Index (a source: an
// archive read at offsets) and archive.Writer (a target: an archive being
// written).

// CreateOptions are the properties a database is created with.
type CreateOptions struct {
	Partitioned bool
	Q, N        int // shards and replicas; 0: the server's default
}

// ErrExists is returned by CreateDB when the database exists.
var ErrExists = errors.New("database already exists")

// ServerCaps says what a many-database endpoint supports.
type ServerCaps struct {
	// Checkpoints: its databases keep `_local` documents (checkpoints,
	// claims), so a rerun recognises and resumes its own work.
	Checkpoints bool
	// Counts: a database written into can be read back (Info's doc
	// counts, and as a Source) to check a copy.
	Counts bool
	// DBsInfo: the counts of many databases come in one request
	// (`_dbs_info`); without it each costs one.
	DBsInfo bool
	// Seek: several databases can be read at once, each from its own
	// place; without it they are read in order, one after the other.
	Seek bool
	// ReadOnce: a database opened as a Source can be read once (its
	// Changes called once): to read it again (a check, a second copy)
	// it is opened again.
	ReadOnce bool
	// StoredCounts: a database opened as a Target counts what it stored
	// (StoredCounter), so a copy into it is checked without reading it
	// back (an archive being written).
	StoredCounts bool
}

// StoredCounter is a Target that counts the leaf revisions it stored.
type StoredCounter interface {
	// Stored returns the leaf revisions stored so far (tombstones
	// included); whole says they are the whole database, not only its
	// changes after an earlier copy (an incremental backup).
	Stored() (leaves int64, whole bool)
}

// Server is what every many-database endpoint has.
type Server interface {
	// AllDBs lists database names after startAfter (exclusive; "" for
	// the first), at most limit (<= 0: no limit). An endpoint that does
	// not page returns every name (see fleet.ListDBs).
	AllDBs(ctx context.Context, startAfter string, limit int) ([]string, error)
	// Caps says what the endpoint supports.
	ServerCaps() ServerCaps
}

// SourceServer is a Server databases are copied from.
type SourceServer interface {
	Server
	// OpenSource opens database name as a Source; readOnly: it is never
	// written (no checkpoint on the source).
	OpenSource(ctx context.Context, name string, readOnly bool) (Source, error)
}

// TargetServer is a Server databases are copied into.
type TargetServer interface {
	Server
	// CreateDB creates database name with o; ErrExists (wrapped) when it
	// exists.
	CreateDB(ctx context.Context, name string, o CreateOptions) error
	// OpenTarget opens database name as a Target; created says this run
	// has just created it (it holds what a new database holds, so
	// properties at their defaults need not be written).
	OpenTarget(ctx context.Context, name string, created bool) (Target, error)
}
