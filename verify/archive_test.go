package verify_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

func otherKind(k couchtest.Kind) couchtest.Kind {
	if k == couchtest.CouchDB {
		return couchtest.PouchDB
	}
	return couchtest.CouchDB
}

func openDB(t *testing.T, srv *couchtest.Server, name string) *couch.DB {
	t.Helper()
	ep, err := couch.Probe(t.Context(), srv.AdminURL(), couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ep.Server.DB(name)
}

// firstDB opens an archive and its first database.
func firstDB(t *testing.T, data []byte) *archive.DBReader {
	t.Helper()
	rd, err := archive.NewReader(bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	dbr, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	return dbr
}

// TestCompare_ArchiveAcrossVendors backs a database of the run's kind up
// into an archive, restores the archive into the other vendor's server and
// compares the archive with the copy in full mode: equal. The two servers
// digest compressible attachments differently (CouchDB the md5 of the gzip
// bytes it stores, PouchDB Server that of the plain bytes), so the
// archive's attachments must be compared by content, which the archive
// side delivers only while its feed is read.
func TestCompare_ArchiveAcrossVendors(t *testing.T) {
	src := couchtest.Shared(t)
	dst := couchtest.StartKind(t, otherKind(src.Kind))
	name := src.NewDB(t)
	text := strings.Repeat("the same bytes on both servers\n", 200)
	withText := func(id, s string) json.RawMessage {
		return raw(`{"_id":%q,"_rev":"1-a","_attachments":{"a.txt":{"content_type":"text/plain","data":%q}}}`, id, b64(s))
	}
	if _, err := src.Client().BulkDocs(t.Context(), name, false,
		withText("t", text),
		raw(`{"_id":"j","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"a.json":{"content_type":"application/json","revpos":2,"data":%q}}}`, b64(`{"k":"`+text+`"}`)),
		raw(`{"_id":"bin","_rev":"1-a","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(text)),
		withText("u", text),
	); err != nil {
		t.Fatal(err)
	}
	sdb := openDB(t, src, name)

	// Back up.
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dbw, err := w.Database(name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := sdb.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dbw.SetSourceInfo(info)
	if _, err := replicate.Run(t.Context(), sdb, dbw, replicate.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := dbw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// Restore into the other vendor, whose "u" already holds rev 1-a with
	// other content of the same length (so the restore keeps it).
	if err := dst.Client().CreateDB(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Client().BulkDocs(t.Context(), name, false, withText("u", strings.ToUpper(text))); err != nil {
		t.Fatal(err)
	}
	ddb := openDB(t, dst, name)
	res, err := replicate.Run(t.Context(), firstDB(t, buf.Bytes()), ddb, replicate.Options{})
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("restore: %v, failures %v", err, res.Failures)
	}

	// Compare.
	sp, err := verify.NewSpooled(firstDB(t, buf.Bytes()), "")
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	r, err := verify.Compare(t.Context(), sp, ddb, verify.Options{Mode: verify.Full, LenientRevpos: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leaves != 4 || r.Total != 1 || !has(r, verify.KindAttachment, "u", "1-a") {
		t.Fatalf("%s archive vs %s copy: want one difference, on u: %s", src.Kind, dst.Kind, dump(r))
	}
	if msg := r.Differences[0].String(); !strings.Contains(msg, "content differs") || strings.Contains(msg, "verify:") || strings.Contains(msg, "<nil>") {
		t.Errorf("difference reads %q", msg)
	}
}
