package replicate_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// TestContinuous_EditKeepsAttachmentUnread (conformance A5, found by a
// new user on CouchDB 3.5: a continuous copy of one database sent a
// document's unchanged attachment again on every edit, and counted every
// revision offered as missing_found): after an initial copy into an
// empty target the engine skips `_revs_diff` (the target lacks
// everything); once it follows the feed it must ask again, so that an
// edited document's attachment is fetched with atts_since (its
// possible_ancestors) and written as a stub.
func TestContinuous_EditKeepsAttachmentUnread(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	if srv.Kind != couchtest.CouchDB {
		t.Skip("possible_ancestors and atts_since are CouchDB's (PouchDB Server ignores atts_since)")
	}
	c := srv.Client()
	ctx := t.Context()
	loadDocs(t, srv, src, 600, 100) // more than one batch: the skip is learnt
	data := make([]byte, 1<<20)
	rand.Read(data)
	rev, err := c.PutAttachment(ctx, src, "big", "", "a.bin", "application/octet-stream", data)
	if err != nil {
		t.Fatal(err)
	}
	obs := newRecObserver()
	var cs replicate.Counters
	f := follow(t, sdb, tdb, replicate.Options{Observer: obs, Counters: &cs, FlushInterval: 50 * time.Millisecond})
	obs.waitCaughtUp(t)
	waitEqual(t, srv, src, tgt, f)
	before := cs.Snapshot()
	if _, err := c.PutDoc(ctx, src, "big", map[string]any{"_rev": rev, "v": 2,
		"_attachments": map[string]any{"a.bin": map[string]any{"stub": true}}}); err != nil {
		t.Fatal(err)
	}
	waitEqual(t, srv, src, tgt, f)
	res := f.stop(t)
	after := res.Stats
	t.Logf("before the edit %+v; after %+v", before, after)
	if n := after.AttachmentsRead - before.AttachmentsRead; n != 0 {
		t.Errorf("the edit read %d attachments' bytes again, want none", n)
	}
	if n := after.AttachmentsSkip - before.AttachmentsSkip; n != 1 {
		t.Errorf("the edit wrote %d attachments as stubs, want 1", n)
	}
	if n := after.MissingFound - before.MissingFound; n != 1 {
		t.Errorf("the edit counted %d revisions missing_found, want 1", n)
	}
}

// TestContinuous_QuickEditsWriteAttachmentOnce (found by a new user on
// CouchDB 3.5: a document created with a 4.5 MB attachment and edited ten
// times at once sent the attachment to the target once per revision, 47
// MiB): revisions of one document in one batch that the source answers
// with the same latest leaf (or that another fetched revision has in its
// history) are written once.
func TestContinuous_QuickEditsWriteAttachmentOnce(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	c := srv.Client()
	ctx := t.Context()
	loadDocs(t, srv, src, 10, 100)
	obs := newRecObserver()
	var cs replicate.Counters
	f := follow(t, sdb, tdb, replicate.Options{Observer: obs, Counters: &cs})
	obs.waitCaughtUp(t)
	waitEqual(t, srv, src, tgt, f)
	before := cs.Snapshot()
	data := make([]byte, 1<<20)
	rand.Read(data)
	rev, err := c.PutAttachment(ctx, src, "fast", "", "a.bin", "application/octet-stream", data)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Atts map[string]any `json:"_attachments"` // stubs (with their digest: PouchDB Server wants it)
	}
	if err := c.GetJSON(ctx, "/"+src+"/fast", &doc); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if rev, err = c.PutDoc(ctx, src, "fast", map[string]any{"_rev": rev, "v": i, "_attachments": doc.Atts}); err != nil {
			t.Fatal(err)
		}
	}
	waitEqual(t, srv, src, tgt, f)
	res := f.stop(t)
	after := res.Stats
	t.Logf("before %+v; after %+v", before, after)
	// Each batch writes the document's leaf once, its attachment with it
	// (the first may also write the new document as the feed delivered
	// it); how many batches the 11 changes fall into depends on timing.
	batches := after.Batches - before.Batches
	if n, most := after.Bytes-before.Bytes, (batches+1)*(1<<20+64<<10); n > most {
		t.Errorf("the new document and its 10 edits, in %d batches, wrote %d bytes, want the 1 MiB attachment at most once a batch and once more (%d bytes)", batches, n, most)
	}
}
