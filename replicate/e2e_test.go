package replicate_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

func TestMain(m *testing.M) { couchtest.Main(m) }

// pair creates a source and a target database on the shared server and
// returns handles on both.
func pair(t *testing.T) (srv *couchtest.Server, src, tgt string, sdb, tdb *couch.DB) {
	t.Helper()
	srv = couchtest.Shared(t)
	src, tgt = srv.NewDB(t), srv.NewDB(t)
	return srv, src, tgt, openDB(t, srv, src), openDB(t, srv, tgt)
}

func openDB(t *testing.T, srv *couchtest.Server, name string) *couch.DB {
	t.Helper()
	ep, err := couch.Probe(t.Context(), srv.AdminURL(), couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ep.Server.DB(name)
}

func raw(format string, args ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, args...))
}

func mustBulk(t *testing.T, srv *couchtest.Server, db string, newEdits bool, docs ...json.RawMessage) {
	t.Helper()
	res, err := srv.Client().BulkDocs(t.Context(), db, newEdits, docs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("load %s: %s %s", r.ID, r.Error, r.Reason)
		}
	}
}

func runOK(t *testing.T, sdb, tdb *couch.DB, opts replicate.Options) *replicate.Result {
	t.Helper()
	res, err := replicate.Run(context.Background(), sdb, tdb, opts)
	if err != nil {
		t.Fatalf("replicate: %v", err)
	}
	if len(res.Failures) > 0 {
		t.Fatalf("unexpected failures: %v", res.Failures)
	}
	return res
}

func TestReplicateConflictsTombstonesAndNames(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	// R1: a long live branch and a shorter deleted branch; R4: a tombstone
	// with body fields; E2/E3: ids that need encoding.
	mustBulk(t, srv, src, false,
		raw(`{"_id":"r1","_rev":"3-c","v":3,"_revisions":{"start":3,"ids":["c","b","a"]}}`),
		raw(`{"_id":"r1","_rev":"2-x","_deleted":true,"_revisions":{"start":2,"ids":["x","a"]}}`),
		raw(`{"_id":"multi","_rev":"1-a","v":"a"}`),
		raw(`{"_id":"multi","_rev":"1-b","v":"b"}`),
		raw(`{"_id":"multi","_rev":"1-c","_deleted":true,"v":"c"}`),
		raw(`{"_id":"r4","_rev":"2-d","_deleted":true,"kept":"field","n":1.50,"_revisions":{"start":2,"ids":["d","a"]}}`),
	)
	for _, id := range []string{"a+b", "a b", "a%2Bb", "123+456", "folder/file", "a/b/c", "é/ü", "_design/with/slash"} {
		if _, err := srv.Client().PutDoc(t.Context(), src, id, map[string]any{"id": id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.Client().PutDoc(t.Context(), src, "_design/app", map[string]any{"views": map[string]any{"v": map[string]any{"map": "function(d){emit(d._id)}"}}}); err != nil {
		t.Fatal(err)
	}
	res := runOK(t, sdb, tdb, replicate.Options{})
	if res.Stats.DocsWritten != 15 {
		t.Errorf("docs_written = %d, want 15 (every leaf)", res.Stats.DocsWritten)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)
	ids := allIDs(t, srv, tgt)
	for _, want := range []string{"a+b", "a b", "a%2Bb", "123+456"} {
		if !ids[want] {
			t.Errorf("target lacks id %q (has %v)", want, ids)
		}
	}
	// A second run finds nothing to do and writes nothing.
	res2 := runOK(t, sdb, tdb, replicate.Options{})
	if res2.Stats.DocsWritten != 0 || res2.Stats.ChangesRead != 0 {
		t.Errorf("second run: %+v, want nothing read or written", res2.Stats)
	}
}

func allIDs(t *testing.T, srv *couchtest.Server, db string) map[string]bool {
	t.Helper()
	var out struct {
		Rows []struct{ ID string } `json:"rows"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(db)+"/_all_docs", &out); err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, r := range out.Rows {
		m[r.ID] = true
	}
	return m
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestReplicateAttachments(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	c := srv.Client()
	ctx := t.Context()
	// A1: a 1 KB text/plain attachment among 10 plain docs.
	for i := 0; i < 10; i++ {
		if _, err := c.PutDoc(ctx, src, fmt.Sprintf("plain-%d", i), map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := c.PutDoc(ctx, src, "text", map[string]any{"kind": "text"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutAttachment(ctx, src, "text", rev, "note.txt", "text/plain", []byte(strings.Repeat("sofa ", 205))); err != nil {
		t.Fatal(err)
	}
	// A2: 1.7 MB of random bytes, and a small PNG.
	rev, err = c.PutDoc(ctx, src, "big", map[string]any{"kind": "big"})
	if err != nil {
		t.Fatal(err)
	}
	big := randomBytes(1_700_000)
	if rev, err = c.PutAttachment(ctx, src, "big", rev, "blob.bin", "application/octet-stream", big); err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	if _, err := c.PutAttachment(ctx, src, "big", rev, "pixel.png", "image/png", png); err != nil {
		t.Fatal(err)
	}
	res := runOK(t, sdb, tdb, replicate.Options{})
	if res.Stats.AttachmentsRead != 3 {
		t.Errorf("attachments_read = %d, want 3", res.Stats.AttachmentsRead)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)

	// A5: revision 2 changes only the body; the second run must not read
	// the attachment bytes again.
	var doc map[string]any
	if err := c.GetJSON(ctx, "/"+couchtest.EscapeDB(src)+"/big", &doc); err != nil {
		t.Fatal(err)
	}
	doc["kind"] = "bigger"
	if _, err := c.PutDoc(ctx, src, "big", doc); err != nil {
		t.Fatal(err)
	}
	res = runOK(t, sdb, tdb, replicate.Options{})
	if res.Stats.DocsWritten != 1 || res.Stats.AttachmentsRead != 0 || res.Stats.AttachmentsSkip != 2 {
		t.Errorf("second run stats %+v: want 1 revision written, 0 attachments read, 2 sent as stubs", res.Stats)
	}
	if res.Stats.Bytes > 100_000 {
		t.Errorf("second run wrote %d bytes: attachment bytes travelled again", res.Stats.Bytes)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)
}

func TestReplicateLongIDAndManyConflicts(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	c := srv.Client()
	ctx := t.Context()
	// E4: a 20,000-character id among 10 normal docs.
	long := strings.Repeat("x", 20000)
	// The second long id carries an attachment: too long for an
	// attachment URL, it is read through _bulk_get in a POST body.
	longAtt := strings.Repeat("y", 20000)
	docs := []json.RawMessage{raw(`{"_id":%q,"v":1}`, long),
		raw(`{"_id":%q,"_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, longAtt, b64(randomBytes(100_000)))}
	for i := 0; i < 10; i++ {
		docs = append(docs, raw(`{"_id":"n%d"}`, i))
	}
	mustBulk(t, srv, src, true, docs...)
	// R2: 40 conflicting leaves, each with its own 1 KB attachment, with
	// an older copy already on the target.
	var leaves []json.RawMessage
	for i := 0; i < 40; i++ {
		data := []byte(strings.Repeat(fmt.Sprintf("%02d", i), 512))
		leaves = append(leaves, raw(`{"_id":"conflicted","_rev":"2-l%02d","leaf":%d,"_revisions":{"start":2,"ids":["l%02d","root"]},"_attachments":{"a%d.txt":{"content_type":"text/plain","data":%q}}}`,
			i, i, i, i, b64(data)))
	}
	mustBulk(t, srv, src, false, raw(`{"_id":"conflicted","_rev":"1-root","leaf":-1}`))
	runOK(t, sdb, tdb, replicate.Options{})
	mustBulk(t, srv, src, false, leaves...)
	res := runOK(t, sdb, tdb, replicate.Options{BatchSize: 7, Workers: 3})
	if res.Stats.DocsWritten != 40 {
		t.Errorf("docs_written = %d, want 40", res.Stats.DocsWritten)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)
	_ = ctx
	_ = c
}

// Without _bulk_get (CouchDB 1.x, or a proxy refusing it) revisions are
// read with open_revs GETs; attachments written as multipart/related PUTs.
func TestReplicateOpenRevsFallbackAndMultipartWrites(t *testing.T) {
	srv, src, tgt, _, _ := pair(t)
	c := srv.Client()
	ctx := t.Context()
	mustBulk(t, srv, src, false,
		raw(`{"_id":"c","_rev":"2-b","v":2,"_revisions":{"start":2,"ids":["b","a"]}}`),
		raw(`{"_id":"c","_rev":"2-x","_deleted":true,"_revisions":{"start":2,"ids":["x","a"]}}`),
		raw(`{"_id":"a/b+c","_rev":"1-q","v":1}`),
	)
	rev, err := c.PutDoc(ctx, src, "withatt", map[string]any{"k": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutAttachment(ctx, src, "withatt", rev, "a b+c.bin", "application/octet-stream", randomBytes(300_000)); err != nil {
		t.Fatal(err)
	}
	p := faultproxy.StartT(t, srv.URL)
	if err := p.SetRules(faultproxy.Rule{Name: "no-bulk-get", Method: "POST", Path: `/_bulk_get$`, Fault: faultproxy.Status, Status: 404}); err != nil {
		t.Fatal(err)
	}
	ep, err := couch.Probe(ctx, p.URL, couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sdb := ep.Server.DB(src)
	tdb := openDB(t, srv, tgt)
	tdb = tdb.Server().OpenDB(tgt, couch.DBOptions{Multipart: true})
	res := runOK(t, sdb, tdb, replicate.Options{})
	if got := p.Rule("no-bulk-get").Fired; got != 1 {
		t.Errorf("_bulk_get refused %d times, want once (then open_revs)", got)
	}
	if res.Stats.DocsWritten != 4 {
		t.Errorf("docs_written = %d, want 4", res.Stats.DocsWritten)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)
}

// A read-only source (checkpoints on the target only) deleted and
// recreated with more updates than the checkpoint's seq: PouchDB Server
// keeps instance_start_time and the seq alone looks plausible, but the
// checkpoint's anchor revision is gone, so the run starts over and loses
// nothing.
func TestReplicateRecreatedReadOnlySourceAnchor(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	var docs []json.RawMessage
	for i := 0; i < 10; i++ {
		docs = append(docs, raw(`{"_id":"old%02d"}`, i))
	}
	mustBulk(t, srv, src, true, docs...)
	runOK(t, sdb, tdb, replicate.Options{SourceReadOnly: true})
	c := srv.Client()
	if err := c.DeleteDB(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	docs = nil
	for i := 0; i < 30; i++ {
		docs = append(docs, raw(`{"_id":"new%02d"}`, i))
	}
	mustBulk(t, srv, src, true, docs...)
	res := runOK(t, sdb, tdb, replicate.Options{SourceReadOnly: true})
	if len(res.StartSeq) != 0 || res.Stats.DocsWritten != 30 {
		t.Errorf("second run started at %s and wrote %d, want from the beginning and 30", res.StartSeq.String(), res.Stats.DocsWritten)
	}
	if ids := allIDs(t, srv, tgt); len(ids) != 40 {
		t.Errorf("target holds %d docs, want 40", len(ids))
	}
}

// The same, recreated with the same first document (the same revision
// id: revision ids are the hash of the body on both servers), so the
// anchor is still known: the checkpoint's tail, the last revision it
// covers, is not, and the run starts over.
func TestReplicateRecreatedSameFirstDocTail(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	first := raw(`{"_id":"_design/app","views":{}}`)
	mustBulk(t, srv, src, true, first, raw(`{"_id":"d2","v":"old2"}`), raw(`{"_id":"d3","v":"old3"}`))
	runOK(t, sdb, tdb, replicate.Options{SourceReadOnly: true, BatchSize: 1})
	c := srv.Client()
	if err := c.DeleteDB(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	for _, d := range []json.RawMessage{first, raw(`{"_id":"n2"}`), raw(`{"_id":"n3"}`), raw(`{"_id":"n4"}`)} {
		mustBulk(t, srv, src, true, d) // one seq each: update_seq 4 > 3
	}
	res := runOK(t, sdb, tdb, replicate.Options{SourceReadOnly: true, BatchSize: 1})
	if len(res.StartSeq) != 0 {
		t.Errorf("second run started at %s, want from the beginning", res.StartSeq.String())
	}
	ids := allIDs(t, srv, tgt)
	for _, id := range []string{"n2", "n3", "n4", "d2", "d3"} {
		if !ids[id] {
			t.Errorf("target lacks %s: %v", id, ids)
		}
	}
}

// An attachment the source cannot serve (404 here) makes only its revision
// a reported failure, with id, rev and reason; the others are copied.
func TestReplicateUnreadableAttachmentReported(t *testing.T) {
	srv, src, tgt, _, _ := pair(t)
	c := srv.Client()
	ctx := t.Context()
	mustBulk(t, srv, src, true, raw(`{"_id":"plain1"}`), raw(`{"_id":"plain2"}`))
	rev, err := c.PutDoc(ctx, src, "gone", map[string]any{"k": 1})
	if err != nil {
		t.Fatal(err)
	}
	// Larger than a batched read takes (64 KiB): read alone, by the GET
	// the proxy refuses.
	if _, err := c.PutAttachment(ctx, src, "gone", rev, "a.bin", "application/octet-stream", randomBytes(100<<10)); err != nil {
		t.Fatal(err)
	}
	p := faultproxy.StartT(t, srv.URL)
	if err := p.SetRules(faultproxy.Rule{Name: "404", Method: "GET", Path: `/gone/a\.bin$`, Fault: faultproxy.Status, Status: 404}); err != nil {
		t.Fatal(err)
	}
	ep, err := couch.Probe(ctx, p.URL, couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := replicate.Run(ctx, ep.Server.DB(src), openDB(t, srv, tgt), replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 1 || res.Failures[0].ID != "gone" || res.Failures[0].Error != "read_failed" {
		t.Fatalf("failures %+v, want the one document named", res.Failures)
	}
	if ids := allIDs(t, srv, tgt); !ids["plain1"] || !ids["plain2"] || ids["gone"] {
		t.Errorf("target ids %v, want plain1 and plain2 only", ids)
	}
}

// Attachments at or above StreamThreshold are piped from the source's
// answer into the target's multipart/related PUT, never held whole; the
// copy is equal (bytes, digest, lengths) and smaller ones still travel the
// usual way.
func TestReplicateStreamsLargeAttachments(t *testing.T) {
	srv, src, tgt, sdb, tdb := pair(t)
	c := srv.Client()
	ctx := t.Context()
	for i, size := range []int{3_000_000, 50_000} {
		id := fmt.Sprintf("doc%d", i)
		rev, err := c.PutDoc(ctx, src, id, map[string]any{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		if rev, err = c.PutAttachment(ctx, src, id, rev, "big.bin", "application/octet-stream", randomBytes(size)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutAttachment(ctx, src, id, rev, "small.txt", "text/plain", []byte("small")); err != nil {
			t.Fatal(err)
		}
	}
	res := runOK(t, sdb, tdb, replicate.Options{StreamThreshold: 1 << 20, MaxInflightBytes: 1 << 20})
	if res.Stats.DocsWritten != 2 || res.Stats.AttachmentsRead != 4 || res.Stats.AttachmentsPiped != 1 {
		t.Errorf("stats %+v: want 2 revisions written, 4 attachments read, 1 of them piped", res.Stats)
	}
	couchtest.AssertEqual(t, srv.DBURL(src), srv.DBURL(tgt), pouch)
}
