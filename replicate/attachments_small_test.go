package replicate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/replicate"
)

// TestCouchDB_SmallAttachmentsInBatches: on CouchDB the bytes of small
// identity-encoded attachments are read many revisions per `_bulk_get`
// (attachments inline), not one GET each; an attachment CouchDB stores
// gzip-encoded (text/plain) and one too large for a batch are still read
// alone, as stored. The copy is equal, every attachment counted read.
func TestCouchDB_SmallAttachmentsInBatches(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "the batched read is CouchDB's (PouchDB Server reads each alone)")
	srv := couchtest.Shared(t)
	src, tgt := srv.NewDB(t), srv.NewDB(t)
	const small, gz = 60, 5
	var docs []json.RawMessage
	for i := 0; i < small; i++ {
		docs = append(docs, raw(`{"_id":"s%02d","i":%d,"_attachments":{"a.png":{"content_type":"image/png","data":%q},"b.bin":{"content_type":"application/octet-stream","data":%q}}}`,
			i, i, b64(randomBytes(1024)), b64(randomBytes(2048))))
	}
	for i := 0; i < gz; i++ {
		docs = append(docs, raw(`{"_id":"t%02d","_attachments":{"notes.txt":{"content_type":"text/plain","data":%q}}}`,
			i, b64([]byte(strings.Repeat("a compressible line of text\n", 200)))))
	}
	docs = append(docs, raw(`{"_id":"big","_attachments":{"big.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(randomBytes(100<<10))))
	mustBulk(t, srv, src, true, docs...)

	rec := recproxy.Start(t, srv.AdminURL())
	res := runOK(t, openAt(t, rec.UserURL(srv.AdminUser, srv.AdminPassword), src), openDB(t, srv, tgt), replicate.Options{})
	var alone, batched int
	for _, e := range rec.Exchanges() {
		switch {
		case e.Method == "GET" && strings.Count(e.Path, "/") == 3:
			alone++ // GET /db/doc/att
		case strings.HasSuffix(e.Path, "/_bulk_get") && strings.Contains(e.Query, "attachments=true"):
			batched++
		}
	}
	t.Logf("%d requests: %d attachments read alone, %d batched _bulk_get; stats %+v", len(rec.Exchanges()), alone, batched, res.Stats)
	if alone != gz+1 {
		t.Errorf("%d attachments read alone, want %d (the gzip-stored and the large one)", alone, gz+1)
	}
	if batched == 0 || batched > 2 {
		t.Errorf("%d _bulk_get requests with attachments inline, want 1 or 2 for %d small revisions", batched, small)
	}
	if want := int64(2*small + gz + 1); res.Stats.AttachmentsRead != want {
		t.Errorf("attachments_read=%d, want %d", res.Stats.AttachmentsRead, want)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt))
}
