package main

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestVerify_ArchiveAgainstOtherVendor: a backup of one vendor's server,
// restored into the other vendor's, compares equal with `verify --full
// ARCHIVE URL`, although the two digest compressible attachments
// differently (CouchDB the md5 of the gzip bytes it stores, PouchDB
// Server that of the plain bytes).
func TestVerify_ArchiveAgainstOtherVendor(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	text := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("plain text, compressible\n", 100)))
	arCreate(t, src, "app", true,
		arRaw(`{"_id":"t","_attachments":{"a.txt":{"content_type":"text/plain","data":%q}}}`, text),
		arRaw(`{"_id":"j","_attachments":{"a.json":{"content_type":"application/json","data":%q}}}`, base64.StdEncoding.EncodeToString([]byte(`{"k":[1,2,3]}`))),
		arRaw(`{"_id":"b","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, text))
	path := filepath.Join(t.TempDir(), "src.sofa")
	arSofa(t, bin, nil, "backup", src.DBURL("app"), path, "-q").want(t, exitOK)
	dst := couchtest.StartKind(t, otherKind(src.Kind))
	arSofa(t, bin, nil, "restore", path, dst.URL, "-q").want(t, exitOK)

	r := arSofa(t, bin, nil, "verify", "--full", path, dst.DBURL("app"))
	if r.code != exitOK || strings.Contains(r.stderr, "digest") {
		t.Errorf("%s archive vs %s copy: exit %d:\n%s", src.Kind, dst.Kind, r.code, r.stderr)
	}
}
