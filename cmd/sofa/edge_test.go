package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// Defects met by a new user on CouchDB 3.5 (copy engine and verify), end
// to end through the sofa binary.

// zeroDocs are documents with zero-byte attachments of several content
// types (CouchDB stores text/* gzip-compressible types encoded), one also
// carrying a non-empty attachment, among plain documents.
func zeroDocs() []json.RawMessage {
	return []json.RawMessage{
		arRaw(`{"_id":"z-text","_attachments":{"f":{"content_type":"text/plain","data":""}}}`),
		arRaw(`{"_id":"z-bin","_attachments":{"f":{"content_type":"application/octet-stream","data":""}}}`),
		arRaw(`{"_id":"z-json","_attachments":{"f":{"content_type":"application/json","data":""},"g":{"content_type":"text/plain","data":%q}}}`, b64([]byte("not empty"))),
		arRaw(`{"_id":"p1","n":1}`),
		arRaw(`{"_id":"p2","n":2}`),
	}
}

// Zero-length attachments copy into CouchDB (from CouchDB and from
// PouchDB Server, db and server copies) and back up/restore equal.
func TestEdge_ZeroLengthAttachments(t *testing.T) {
	bin := sofaBin(t)
	couch := couchtest.StartKind(t, couchtest.CouchDB)
	pouch := couchtest.StartKind(t, couchtest.PouchDB)
	arCreate(t, couch, "zero", true, zeroDocs()...)
	arCreate(t, pouch, "zero", true, zeroDocs()...)

	for _, src := range []*couchtest.Server{couch, pouch} {
		t.Run(string(src.Kind), func(t *testing.T) {
			// one database
			tgt := couchtest.StartKind(t, couchtest.CouchDB)
			r := arSofa(t, bin, nil, "replicate", src.DBURL("zero"), tgt.DBURL("zero"), "--create-target")
			r.want(t, exitOK)
			edgeEqual(t, src, "zero", tgt, "zero")
			// whole server
			tgt2 := couchtest.StartKind(t, couchtest.CouchDB)
			r = arSofa(t, bin, nil, "replicate", src.URL, tgt2.URL, "--json")
			r.want(t, exitOK)
			if s := r.summary(t); s.DocsWritten < 5 {
				t.Errorf("server copy wrote %d documents, want at least 5", s.DocsWritten)
			}
			edgeEqual(t, src, "zero", tgt2, "zero")
			// backup and restore
			path := filepath.Join(t.TempDir(), "zero.sofa")
			arSofa(t, bin, nil, "backup", src.DBURL("zero"), path).want(t, exitOK)
			tgt3 := couchtest.StartKind(t, couchtest.CouchDB)
			arSofa(t, bin, nil, "restore", path, tgt3.URL).want(t, exitOK)
			edgeEqual(t, src, "zero", tgt3, "zero")
		})
	}
}

// edgeEqual compares db on src with db2 on tgt (_security included); for
// servers of different kinds the attachment digests are not compared (the
// bytes are).
func edgeEqual(t *testing.T, src *couchtest.Server, db string, tgt *couchtest.Server, db2 string) {
	t.Helper()
	d, err := couchtest.CompareDBs(t.Context(), src.DBURL(db), tgt.DBURL(db2),
		couchtest.CompareOptions{PouchDBRevpos: true, Security: true, RevsLimit: true, DigestsByKind: src.Kind != tgt.Kind})
	if err != nil {
		t.Fatalf("compare %s with %s: %v", db, db2, err)
	}
	if !d.Equal() {
		t.Errorf("%s -> %s: %s", db, db2, d)
	}
}

// A revision whose attachment goes as a stub the target cannot resolve
// (the target holds the ancestor, but without that attachment) makes
// CouchDB refuse the whole _bulk_docs with 412 missing_stub, after a
// clustered database may have stored part of it. The batch is split, that
// revision is written again with its bytes, and docs_written counts what
// was written.
func TestEdge_MissingStubBatch(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "src", true, arSmallDocs("p", 40)...)
	arWrite(t, srv, "src", false, arRaw(`{"_id":"s","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"f":{"content_type":"application/octet-stream","revpos":1,"data":%q}}}`, b64([]byte("bytes of f"))))
	arCreate(t, srv, "tgt", false, arRaw(`{"_id":"s","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`))
	r := arSofa(t, bin, nil, "replicate", srv.DBURL("src"), srv.DBURL("tgt"), "--json")
	r.want(t, exitOK)
	var res resultDoc
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("output is not JSON (%v):\n%s", err, r.stdout)
	}
	if res.Stats.DocsWritten != 41 || res.Stats.DocWriteFailures != 0 {
		t.Errorf("docs_written=%d doc_write_failures=%d, want 41 and 0", res.Stats.DocsWritten, res.Stats.DocWriteFailures)
	}
	couchtest.AssertEqual(t, srv.DBURL("src"), srv.DBURL("tgt"), couchtest.CompareOptions{PouchDBRevpos: true})
}
