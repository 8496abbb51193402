package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"testing"
)

// TestIndexDisagreesWithManifest: an index whose databases differ from
// those read (a doc_count ls would print, here), sealed with matching
// checksums and a footer pointing at it, fails the read in order (verify)
// and the catalog of a stream: ls and a restore at offsets read the
// index, so it must agree with the groups.
func TestIndexDisagreesWithManifest(t *testing.T) {
	data := goodArchive(t)
	var stored, raw []byte
	bad := rewrite(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
		switch h.Name {
		case indexName:
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			js, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			var idx TOC
			if err := json.Unmarshal(js, &idx); err != nil {
				t.Fatal(err)
			}
			idx.Databases[0].Summary.DocCount += 10
			if raw, err = json.Marshal(idx); err != nil {
				t.Fatal(err)
			}
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(raw)
			zw.Close()
			stored = z.Bytes()
			sealed(h, stored, raw)
			return true, stored
		case footerName:
			var f footer
			if err := json.Unmarshal(bytes.TrimRight(body, " \n"), &f); err != nil {
				t.Fatal(err)
			}
			s := sha256.Sum256(stored)
			f.IndexSHA256, f.IndexSize, f.IndexRawSize = hex.EncodeToString(s[:]), int64(len(stored)), int64(len(raw))
			nb, err := f.encode()
			if err != nil {
				t.Fatal(err)
			}
			sealed(h, nb, nb)
			return true, nb
		}
		return true, body
	})
	if stored == nil {
		t.Fatal("no index member rewritten")
	}
	mustFail(t, bad, ErrManifest, indexName)
	if _, _, err := Catalog(io.MultiReader(bytes.NewReader(bad))); err == nil {
		t.Error("Catalog of the stream accepted an index that disagrees with the manifest")
	}
}
