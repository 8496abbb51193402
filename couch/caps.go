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
	// ChangesPage is the number of `_changes` rows asked per request when
	// neither DBOptions.ChangesPage nor Options.ChangesPage says otherwise.
	//
	// Apache CouchDB streams a feed as it reads it and pays for every
	// page it starts (decoding the since seq, opening each shard's feed
	// from it): for 100,000 rows, pages of 2,000 cost the server 1.8-2.4
	// CPU-s, pages of 10,000 1.4-1.9 and one unpaged feed 1.5-1.6
	// (measured on one CouchDB 3.5, seq_interval 100, a loaded 2-core
	// machine). The seq_interval rows carry a seq every 100 rows anyway,
	// so a broken page resumes near where it broke whatever its size.
	// PouchDB Server keeps DefaultChangesPage.
	ChangesPage int
}

// couchInlineDocsUpTo and couchChangesPage are Caps.InlineDocsUpTo and
// Caps.ChangesPage on Apache CouchDB.
const (
	couchInlineDocsUpTo = 100
	couchChangesPage    = 10000
)

// Caps returns the server's capabilities (see Caps).
func (s *Server) Caps() Caps {
	if s.Vendor == VendorPouchDB {
		return Caps{InlineDocsUpTo: math.MaxInt64, ChangesPage: DefaultChangesPage}
	}
	return Caps{InlineDocsUpTo: couchInlineDocsUpTo, ChangesPage: couchChangesPage}
}

// InlineDocsFeed reports whether ChangesWithDocs is the cheaper way to
// read an initial copy of this database, which holds rows changes rows
// (doc_count + doc_del_count), from its server (Caps.InlineDocsUpTo).
func (d *DB) InlineDocsFeed(rows int64) bool { return rows <= d.srv.Caps().InlineDocsUpTo }
