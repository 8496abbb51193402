package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// withIndex rewrites data's index with edit and seals it as a forger
// would: the index member's checksums and the footer's pointer match the
// new index.
func withIndex(t *testing.T, data []byte, edit func(*TOC)) []byte {
	t.Helper()
	var stored, raw []byte
	out := rewrite(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
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
			edit(&idx)
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
	return out
}

// TestIndexDisagreesWithManifest: an index whose databases differ from
// those read (a doc_count ls would print, here), sealed with matching
// checksums and a footer pointing at it, fails the read in order (verify)
// and the catalog of a stream: ls and a restore at offsets read the
// index, so it must agree with the groups.
func TestIndexDisagreesWithManifest(t *testing.T) {
	bad := withIndex(t, goodArchive(t), func(idx *TOC) { idx.Databases[0].Summary.DocCount += 10 })
	mustFail(t, bad, ErrManifest, indexName)
	if _, _, err := Catalog(io.MultiReader(bytes.NewReader(bad))); err == nil {
		t.Error("Catalog of the stream accepted an index that disagrees with the manifest")
	}
}

// TestIndexLiesAtOffsets: the readers at offsets (a restore of a file,
// ls, the next backup's --since) check the index against the manifest
// they read anyway; an index that leaves a database out, or carries
// other checkpoints than the manifest's (whose next --since would skip
// changes), is refused there as in order, never used.
func TestIndexLiesAtOffsets(t *testing.T) {
	data := goodArchive(t)
	lies := map[string]func(*TOC){
		"a database left out": func(idx *TOC) { idx.Databases = idx.Databases[1:] },
		"other checkpoints": func(idx *TOC) {
			idx.Databases[0].Summary.Checkpoints = map[string]json.RawMessage{"r": json.RawMessage(`{"source_last_seq":"99-later"}`)}
		},
		"another seq": func(idx *TOC) { idx.Databases[1].Summary.Seq = []byte(`"99-later"`) },
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			bad := withIndex(t, data, lie)
			mustFail(t, bad, ErrManifest, indexName)
			ra := bytes.NewReader(bad)
			if _, err := Scan(ra, ra.Size(), nil); !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), manifestName) {
				t.Errorf("Scan (a restore at offsets): %v, want the manifest's disagreement", err)
			}
			if _, dbs, err := Catalog(bytes.NewReader(bad)); !errors.Is(err, ErrManifest) {
				t.Errorf("Catalog (ls) = %d databases, %v; want ErrManifest", len(dbs), err)
			}
			if s, err := ReadSince(bytes.NewReader(bad)); !errors.Is(err, ErrManifest) {
				t.Errorf("ReadSince (--since) = %+v, %v; want ErrManifest", s, err)
			}
		})
	}
	// the truth is read at offsets as before
	ra := bytes.NewReader(data)
	if _, err := Scan(ra, ra.Size(), nil); err != nil {
		t.Fatal(err)
	}
	if _, dbs, err := Catalog(bytes.NewReader(data)); err != nil || len(dbs) != 2 {
		t.Fatalf("Catalog: %d databases, %v", len(dbs), err)
	}
}

// TestIndexPlacesWrongly: an index that places a group, a blob, the
// header or the manifest elsewhere than they are, lists other extern
// blobs, copies another header, or a footer that points elsewhere or
// says another version, each sealed as a forger would, is refused by the
// read in order (verify), which sees where every member is: such an
// archive was "sound" and failed its restore at offsets.
func TestIndexPlacesWrongly(t *testing.T) {
	data := goodArchive(t)
	lies := map[string]func(*TOC){
		"groups swapped": func(idx *TOC) {
			idx.Databases[0].Span, idx.Databases[1].Span = idx.Databases[1].Span, idx.Databases[0].Span
		},
		"group cut short": func(idx *TOC) { idx.Databases[1].End -= 512 },
		"blob moved":      func(idx *TOC) { idx.Blobs[0].Offset += 512 },
		"blob left out":   func(idx *TOC) { idx.Blobs = idx.Blobs[1:] },
		"extern blob left out": func(idx *TOC) {
			for i, d := range idx.Databases {
				if len(d.ExternBlobs) > 0 {
					idx.Databases[i].ExternBlobs = d.ExternBlobs[1:]
					return
				}
			}
			t.Fatal("no database refers to another's blob")
		},
		"header moved":      func(idx *TOC) { idx.HeaderAt.End += 512 },
		"manifest moved":    func(idx *TOC) { idx.Manifest.Offset -= 512 },
		"header copy other": func(idx *TOC) { idx.Header.Tool = "forged" },
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			mustFail(t, withIndex(t, data, lie), ErrManifest, indexName)
		})
	}
	footers := map[string]struct {
		edit func(*footer)
		err  error
	}{
		"footer points before the index": {func(f *footer) { f.IndexOffset -= 512 }, ErrManifest},
		"footer of another version":      {func(f *footer) { f.Version = 3 }, ErrVersion},
	}
	for name, c := range footers {
		t.Run(name, func(t *testing.T) {
			bad := editMember(t, data, func(n string) bool { return n == footerName }, func(b []byte) []byte {
				var f footer
				if err := json.Unmarshal(bytes.TrimRight(b, " \n"), &f); err != nil {
					t.Fatal(err)
				}
				c.edit(&f)
				nb, err := f.encode()
				if err != nil {
					t.Fatal(err)
				}
				return nb
			})
			mustFail(t, bad, c.err, footerName)
			if _, err := ReadTOC(bytes.NewReader(bad), int64(len(bad))); c.err == ErrVersion && !errors.Is(err, ErrVersion) {
				t.Errorf("ReadTOC (ls, a restore at offsets): %v, want ErrVersion", err)
			}
		})
	}
	if _, _, err := tryRead(data, nil); err != nil {
		t.Fatal(err)
	}
}
