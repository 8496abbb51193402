package couch

import "math"

// Caps says which way of reading and writing a server serves fastest, as
// measured against it (scripts/bench.sh, BENCHMARKS.md): what the endpoint
// supports and prefers, so that the replication engine picks by asking
// rather than by knowing servers.
type Caps struct {
	// InlineDocsUpTo: an initial copy of a database of at most this many
	// changes rows (doc_count + doc_del_count) reads its documents inline
	// in the changes feed (`_changes?include_docs=true`); a larger one
	// reads the plain feed and the revisions with parallel `_bulk_get`.
	//
	// PouchDB Server (one node process) serves the inline feed in about
	// the time of the plain one and saves the `_bulk_get` round trips:
	// no limit. Apache CouchDB builds the inline feed in one process, one
	// document after the other: for 10,000 x 1 KiB
	// `_changes?include_docs=true` took 1.43 s where the plain feed took
	// 0.46 s and `_bulk_get` in 500-revision batches, 4 in flight,
	// 0.56 s, the two overlapping in the engine's pipeline and spread
	// over the server's cores. That is about 0.1 ms more per document
	// inline, against one more request (about 2.5 ms at the 400
	// requests/s of a small CouchDB) without it: the inline feed wins for
	// small databases only, such as the many one-document databases of a
	// whole-server copy.
	InlineDocsUpTo int64
}

// couchInlineDocsUpTo is Caps.InlineDocsUpTo on Apache CouchDB.
const couchInlineDocsUpTo = 100

// Caps returns the server's capabilities (see Caps).
func (s *Server) Caps() Caps {
	if s.Vendor == VendorPouchDB {
		return Caps{InlineDocsUpTo: math.MaxInt64}
	}
	return Caps{InlineDocsUpTo: couchInlineDocsUpTo}
}

// InlineDocsFeed reports whether ChangesWithDocs is the cheaper way to
// read an initial copy of this database, which holds rows changes rows
// (doc_count + doc_del_count), from its server (Caps.InlineDocsUpTo).
func (d *DB) InlineDocsFeed(rows int64) bool { return rows <= d.srv.Caps().InlineDocsUpTo }
