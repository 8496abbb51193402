package main

import (
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// Attachments piped into PouchDB Server (at or above --stream-threshold,
// so sent as a multipart/related PUT) keep odd names and their bytes:
// PouchDB Server (multiparty) matches each part to its attachment by the
// part's filename, decoding only `%22`, `\"` and `&#N;` and cutting the
// name at its last backslash. A name it could not match left the
// attachment without data and crashed the server (`%` in a name, a
// backslash); a gzip-stored attachment sent beside a piped one would
// have been stored as its gzip bytes.
func TestEdge_PipedAttachmentNamesIntoPouchDB(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.StartKind(t, couchtest.CouchDB)
	tgt := couchtest.StartKind(t, couchtest.PouchDB)
	big := func() string {
		b := make([]byte, 4096)
		rand.Read(b)
		return b64(b)
	}
	att := func(name, ctype, data string) string {
		n, _ := json.Marshal(name)
		return string(n) + `:{"content_type":"` + ctype + `","data":"` + data + `"}`
	}
	text := b64([]byte("a text attachment CouchDB stores gzip-encoded, a text attachment CouchDB stores gzip-encoded"))
	docs := []json.RawMessage{
		arRaw(`{"_id":"pct","_attachments":{%s}}`, att("100%.bin", "application/octet-stream", big())),
		arRaw(`{"_id":"quote","_attachments":{%s,%s}}`, att(`a"b&#65;c%22d&amp;`, "application/octet-stream", big()), att(`small "q" %25`, "application/octet-stream", big()[:40])),
		arRaw(`{"_id":"back","_attachments":{%s,%s}}`, att(`back\slash.bin`, "application/octet-stream", big()), att(`dir\x`, "application/octet-stream", big()[:40])),
		arRaw(`{"_id":"gz","_attachments":{%s,%s}}`, att("big.bin", "application/octet-stream", big()), att("note.txt", "text/plain", text)),
	}
	arCreate(t, src, "names", true, docs...)
	arSofa(t, bin, nil, "replicate", src.DBURL("names"), tgt.DBURL("names"), "--create-target", "--stream-threshold", "1024").want(t, exitOK)
	edgeEqual(t, src, "names", tgt, "names")
}

// TestEdge_TombstoneAttachmentsIntoPouchDB: PouchDB Server stores a
// deleted revision without its attachments; a copy of one from CouchDB
// says so in a warning, not in silence (a tombstone without attachments
// gets none).
func TestEdge_TombstoneAttachmentsIntoPouchDB(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.StartKind(t, couchtest.CouchDB)
	tgt := couchtest.StartKind(t, couchtest.PouchDB)
	arCreate(t, src, "plain", false, arRaw(`{"_id":"gone","_rev":"1-a","_deleted":true,"kept":1}`), arRaw(`{"_id":"d","_rev":"1-b"}`))
	arCreate(t, src, "tomb", false, arRaw(`{"_id":"gone","_rev":"1-a","_deleted":true,"_attachments":{"a.bin":{"content_type":"text/plain","data":"aGVsbG8="}}}`))
	r := arSofa(t, bin, nil, "replicate", src.DBURL("plain"), tgt.DBURL("plain"), "--create-target")
	r.want(t, exitOK)
	if strings.Contains(r.stderr, "tombstones") {
		t.Errorf("a tombstone without attachments: warned\n%s", r.stderr)
	}
	r = arSofa(t, bin, nil, "replicate", src.DBURL("tomb"), tgt.DBURL("tomb"), "--create-target")
	if !strings.Contains(r.stderr, "keeps no attachments of deleted revisions") {
		t.Errorf("no warning that PouchDB Server kept no attachment of the tombstone:\n%s", r.stderr)
	}
}
