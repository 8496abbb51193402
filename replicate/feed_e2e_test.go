package replicate_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/replicate"
)

// The initial copy's reading pipeline follows the source server's
// capabilities (couch.Caps.InlineDocsUpTo), as measured on each: on
// PouchDB Server documents come inline in `_changes?include_docs=true`
// and no `_bulk_get` is sent; on CouchDB a database of more than 100
// documents is read with the plain feed and `_bulk_get` batches, a small
// one inline (one request fewer). Either way every revision is copied
// (the oracle compares bodies and attachments) and the checkpoint covers
// the whole feed.
func TestInitialCopyFeedFollowsServer(t *testing.T) {
	for _, n := range []int{120, 20} {
		t.Run(fmt.Sprintf("%d docs", n+2), func(t *testing.T) { testInitialCopyFeed(t, n) })
	}
}

func testInitialCopyFeed(t *testing.T, n int) {
	srv := couchtest.Shared(t)
	src, tgt := srv.NewDB(t), srv.NewDB(t)
	docs := make([]json.RawMessage, 0, n+2)
	for i := range n {
		docs = append(docs, raw(`{"_id":"d%03d","n":%d,"s":%q}`, i, i, strings.Repeat("x", 200)))
	}
	// A generation-1 document with an attachment and one with a second
	// generation (its history is not its own hash: never inline).
	docs = append(docs, raw(`{"_id":"att","_attachments":{"a.txt":{"content_type":"text/plain","data":%q}}}`, b64([]byte("hello attachment"))))
	mustBulk(t, srv, src, true, docs...)
	mustBulk(t, srv, src, false, raw(`{"_id":"g2","_rev":"2-b","v":2,"_revisions":{"start":2,"ids":["b","a"]}}`))

	rec := recproxy.Start(t, srv.AdminURL())
	u, _ := url.Parse(rec.URL)
	u.User = url.UserPassword(srv.AdminUser, srv.AdminPassword)
	res := runOK(t, openAt(t, u.String(), src), openDB(t, srv, tgt), replicate.Options{BatchSize: 50, FetchBatch: 50})
	if want := int64(n + 2); res.Stats.DocsWritten != want {
		t.Errorf("docs_written = %d, want %d", res.Stats.DocsWritten, want)
	}
	opts := couchtest.CompareOptions{}
	if srv.Kind == couchtest.PouchDB {
		opts = pouch
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), opts)

	var inline, plain, bulkGets int
	for _, e := range rec.Exchanges() {
		switch {
		case strings.HasSuffix(e.Path, "/_changes"):
			if strings.Contains(e.Query, "include_docs=true") {
				inline++
			} else {
				plain++
			}
		case strings.HasSuffix(e.Path, "/_bulk_get"):
			bulkGets++
		}
	}
	t.Logf("%s: _changes inline %d, plain %d; _bulk_get %d", srv.Kind, inline, plain, bulkGets)
	inlineWanted := srv.Kind == couchtest.PouchDB || n+2 <= 100
	switch {
	case !inlineWanted:
		if inline != 0 || plain == 0 {
			t.Errorf("%s: _changes with include_docs %d, plain %d; want the plain feed only", srv.Kind, inline, plain)
		}
		// 122 revisions in _bulk_get batches of at most 50.
		if bulkGets < 3 {
			t.Errorf("%s: %d _bulk_get requests, want >= 3 (every revision read in batches of 50)", srv.Kind, bulkGets)
		}
	default:
		if inline == 0 || plain != 0 {
			t.Errorf("%s: _changes with include_docs %d, plain %d; want the inline feed only", srv.Kind, inline, plain)
		}
		// Only the revisions that cannot come inline (g2's history, the
		// attachment's bytes) may need reads of their own.
		if bulkGets > 2 {
			t.Errorf("%s: %d _bulk_get requests, want at most 2", srv.Kind, bulkGets)
		}
	}
	if res.EndSeq.String() == "" {
		t.Errorf("no checkpoint seq after a complete copy")
	}
}

// Batches follow the source's document sizes: a database of large
// documents (12 x 1 MiB attachments) is cut into batches of about
// WriteBatchBytes (4 MiB here) where the server gives its size
// (sizes.external, CouchDB), so that the workers share it instead of one
// worker copying it all; a server that gives no size (PouchDB Server)
// keeps batches of BatchSize rows. The copy is equal either way.
func TestBatchesFollowDocumentSize(t *testing.T) {
	srv := couchtest.Shared(t)
	src, tgt := srv.NewDB(t), srv.NewDB(t)
	const n = 12
	var docs []json.RawMessage
	for i := range n {
		docs = append(docs, raw(`{"_id":"big%02d","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, i, b64(randomBytes(1<<20))))
	}
	mustBulk(t, srv, src, true, docs...)
	res := runOK(t, openDB(t, srv, src), openDB(t, srv, tgt), replicate.Options{WriteBatchBytes: 4 << 20, SizeAwareBatches: true})
	if res.Stats.DocsWritten != n {
		t.Errorf("docs_written = %d, want %d", res.Stats.DocsWritten, n)
	}
	opts := couchtest.CompareOptions{}
	if srv.Kind == couchtest.PouchDB {
		opts = pouch
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), opts)
	t.Logf("%s: %d batches", srv.Kind, res.Stats.Batches)
	switch srv.Kind {
	case couchtest.CouchDB:
		if res.Stats.Batches < 3 {
			t.Errorf("%d batches, want >= 3 (about 4 MiB of the 12 MiB each)", res.Stats.Batches)
		}
	default:
		if res.Stats.Batches != 1 {
			t.Errorf("%d batches, want 1 (no size known: BatchSize rows)", res.Stats.Batches)
		}
	}
}
