package archive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// plainArchive is goodArchive uncompressed, so that a test can edit its
// records as text.
func plainArchive(t *testing.T) []byte {
	dbs := map[string][]*replicate.Doc{"alpha": sampleDocs(), "beta": sampleDocs()}
	return writeArchive(t, Options{ChunkSize: 400, Compression: None, Version: 2}, dbs, []string{"alpha", "beta"})
}

// editMember rewrites the content of the members named by match with
// edit, sealed as a forger would; it fails the test when none changed.
func editMember(t *testing.T, data []byte, match func(name string) bool, edit func([]byte) []byte) []byte {
	t.Helper()
	changed := false
	out := rewrite(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
		if !match(h.Name) {
			return true, body
		}
		nb := edit(bytes.Clone(body))
		if !bytes.Equal(nb, body) {
			changed = true
			sealed(h, nb, nb)
		}
		return true, nb
	})
	if !changed {
		t.Fatal("no member changed")
	}
	return out
}

// TestManifestLies: a manifest whose totals or database summaries say
// other than the members read, sealed with matching checksums, is
// refused by the read in order (verify), whichever field it changes.
func TestManifestLies(t *testing.T) {
	data := goodArchive(t)
	lies := map[string]func(m map[string]any){
		"totals.blobs":        func(m map[string]any) { tot(m)["blobs"] = tot(m)["blobs"].(float64) + 1 },
		"totals.stored_bytes": func(m map[string]any) { tot(m)["stored_bytes"] = tot(m)["stored_bytes"].(float64) + 1 },
		"totals.raw_bytes":    func(m map[string]any) { tot(m)["raw_bytes"] = tot(m)["raw_bytes"].(float64) - 1 },
		"tombstones":          func(m map[string]any) { db0(m)["tombstones"] = db0(m)["tombstones"].(float64) + 1 },
		"attachments":         func(m map[string]any) { db0(m)["attachments"] = db0(m)["attachments"].(float64) + 1 },
		"doc_count":           func(m map[string]any) { db0(m)["doc_count"] = db0(m)["doc_count"].(float64) + 1 },
		"stored_bytes":        func(m map[string]any) { db0(m)["stored_bytes"] = db0(m)["stored_bytes"].(float64) + 1 },
		"not sorted": func(m map[string]any) {
			dbs := m["databases"].([]any)
			dbs[0], dbs[1] = dbs[1], dbs[0]
		},
	}
	for name, lie := range lies {
		t.Run(name, func(t *testing.T) {
			bad := editMember(t, data, func(n string) bool { return n == manifestName }, func(b []byte) []byte {
				var m map[string]any
				if err := json.Unmarshal(b, &m); err != nil {
					t.Fatal(err)
				}
				lie(m)
				nb, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				return nb
			})
			mustFail(t, bad, ErrManifest, manifestName)
		})
	}
}

func tot(m map[string]any) map[string]any { return m["totals"].(map[string]any) }
func db0(m map[string]any) map[string]any { return m["databases"].([]any)[0].(map[string]any) }

// TestRecordLies: a group whose members are each sealed but say things
// no writer writes is refused where it is read, naming the member:
// chunks out of their numbering, a history that does not end in its
// revision, an attachment whose blob has another size than it says, an
// unknown compression in the header, an index whose header copy is of
// another version.
func TestRecordLies(t *testing.T) {
	data := plainArchive(t)
	chunk2 := "db/alpha/docs-000002.ndjson"
	cases := []struct {
		name   string
		bad    func(t *testing.T) []byte
		err    error
		member string
	}{
		{"chunk numbering skips", func(t *testing.T) []byte {
			return rewrite(t, data, func(h *tar.Header, body []byte) (bool, []byte) {
				if h.Name == chunk2 {
					h.Name = "db/alpha/docs-000003.ndjson"
				}
				return true, body
			})
		}, ErrFormat, "db/alpha/docs-000003.ndjson"},
		{"history of another generation", func(t *testing.T) []byte {
			return editMember(t, data, func(n string) bool { return strings.HasPrefix(n, "db/alpha/docs-") }, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"start":2,"ids":["jjj"`), []byte(`"start":9,"ids":["jjj"`), 1)
			})
		}, ErrFormat, ""},
		{"blob of another size", func(t *testing.T) []byte {
			return editMember(t, data, func(n string) bool { return strings.HasPrefix(n, "db/alpha/docs-") }, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"length":2400`), []byte(`"length":2399`), 1)
			})
		}, ErrFormat, ""},
		{"unknown compression", func(t *testing.T) []byte {
			return editMember(t, data, func(n string) bool { return n == headerName }, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`"compression": "none"`), []byte(`"compression": "brotli"`), 1)
			})
		}, ErrFormat, headerName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := c.bad(t)
			mustFail(t, bad, c.err, c.member)
		})
	}
	if _, _, err := tryRead(data, nil); err != nil {
		t.Fatalf("the archive itself: %v", err)
	}
	// an index copying a header of version 1 (which has no index) or of
	// a version to come is not used: ls reads in order, and fails where
	// the archive does
	for _, v := range []int{1, FormatVersion + 1} {
		bad := withIndex(t, goodArchive(t), func(idx *TOC) { idx.Header.Version = v })
		if _, err := ReadTOC(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrVersion) {
			t.Errorf("index with a header of version %d: %v, want ErrVersion", v, err)
		}
	}
}

// TestShardMemberHoldsItsShardOnly: a member of a sharded set holds the
// databases whose name hashes to its index; one holding another shard's
// database (moved there, sealed) is refused where its group is read (a
// verify, a restore in order or at offsets), so that a set holding a
// database twice, or in the wrong member, is neither sound nor restored.
func TestShardMemberHoldsItsShardOnly(t *testing.T) {
	names := map[int]string{}
	for i := 0; len(names) < 2; i++ {
		n := "db" + string(rune('a'+i))
		if _, ok := names[ShardOf(n, 2)]; !ok {
			names[ShardOf(n, 2)] = n
		}
	}
	write := func(db string) []byte {
		return writeArchive(t, Options{Shard: &Shard{Index: 0, Count: 2, SetID: "s"}, Version: 2},
			map[string][]*replicate.Doc{db: sampleDocs()[:1]}, []string{db})
	}
	if _, err := Verify(bytes.NewReader(write(names[0])), nil); err != nil {
		t.Fatalf("its own shard's database: %v", err)
	}
	bad := write(names[1])
	mustFail(t, bad, ErrFormat, "db/"+names[1]+"/meta.json")
	ra := bytes.NewReader(bad)
	x, err := Scan(ra, ra.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.OpenDB(x.Groups()[0]); !errors.Is(err, ErrFormat) {
		t.Errorf("the group read at its offset (a restore of a file): %v, want ErrFormat", err)
	}
}

// paxSums returns the SOFA.sha256 and SOFA.raw_sha256 of member name.
func paxSums(t *testing.T, data []byte, name string) (string, string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no member %s: %v", name, err)
		}
		if h.Name == name {
			return h.PAXRecords[paxSHA256], h.PAXRecords[paxRawSHA256]
		}
	}
}

// forgeListed edits member name (keeping its length) and puts its new
// checksums in the manifest's member list, as a forger would: the
// archive's checksums all agree, no offset moves.
func forgeListed(t *testing.T, data []byte, name string, edit func([]byte) []byte) []byte {
	t.Helper()
	oldSum, oldRaw := paxSums(t, data, name)
	data = editMember(t, data, func(n string) bool { return n == name }, edit)
	newSum, newRaw := paxSums(t, data, name)
	return editMember(t, data, func(n string) bool { return n == manifestName }, func(b []byte) []byte {
		b = bytes.ReplaceAll(b, []byte(oldSum), []byte(newSum))
		return bytes.ReplaceAll(b, []byte(oldRaw), []byte(newRaw))
	})
}

// TestGroupLiesEverywhere: a lie told alike by end.json, the manifest and
// the index (every checksum agreeing) about what a group holds is found
// by counting the group: its tombstones and attachment references; and
// meta.json's metadata, which a restore applies, must be the manifest's.
func TestGroupLiesEverywhere(t *testing.T) {
	data := plainArchive(t)
	one := func(b []byte, old, new string) []byte {
		if !bytes.Contains(b, []byte(old)) || len(old) != len(new) {
			t.Fatalf("no %s of the same length as %s", old, new)
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
	t.Run("tombstones", func(t *testing.T) {
		bad := forgeListed(t, data, "db/alpha/end.json", func(b []byte) []byte { return one(b, `"tombstones":1`, `"tombstones":2`) })
		bad = editMember(t, bad, func(n string) bool { return n == manifestName }, func(b []byte) []byte { return one(b, `"tombstones":1`, `"tombstones":2`) })
		bad = withIndex(t, bad, func(idx *TOC) { idx.Databases[0].Summary.Tombstones = 2 })
		mustFail(t, bad, ErrManifest, "db/alpha/end.json")
	})
	t.Run("meta.json security", func(t *testing.T) {
		bad := forgeListed(t, data, "db/alpha/meta.json", func(b []byte) []byte { return one(b, `"names":["a"]`, `"names":["z"]`) })
		mustFail(t, bad, ErrManifest, manifestName)
	})
}

// TestDigestLie: an attachment reference pointed at another blob of the
// same size (sealed) is found by Verify, which checks each reference's
// md5 digest against its blob's bytes.
func TestDigestLie(t *testing.T) {
	a, b := []byte("aaaaaaaa"), []byte("bbbbbbbb")
	docs := []*replicate.Doc{
		doc("x", "1-x", false, `{"_id":"x","_rev":"1-x"}`, att("a.bin", "application/octet-stream", "", a, int64(len(a)), 1)),
		doc("y", "1-y", false, `{"_id":"y","_rev":"1-y"}`, att("b.bin", "application/octet-stream", "", b, int64(len(b)), 1)),
	}
	data := writeArchive(t, Options{Compression: None, Version: 2}, map[string][]*replicate.Doc{"db": docs}, []string{"db"})
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
	sa, sb := sha256.Sum256(a), sha256.Sum256(b)
	bad := forgeListed(t, data, "db/db/docs-000001.ndjson", func(c []byte) []byte {
		return bytes.Replace(c, []byte(hex.EncodeToString(sa[:])), []byte(hex.EncodeToString(sb[:])), 1)
	})
	if _, err := Verify(bytes.NewReader(bad), nil); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"a.bin"`) {
		t.Errorf("Verify: %v, want ErrFormat naming a.bin", err)
	}
}

// TestCheckpointBesideItsSeq: a checkpoint whose source_last_seq is not
// the database's seq, told alike by the manifest and the index (a later
// --since would start from it and skip changes), is refused by verify.
func TestCheckpointBesideItsSeq(t *testing.T) {
	data := goodArchive(t)
	old, lie := []byte(`"source_last_seq":"42-abc"`), []byte(`"source_last_seq":"99-abc"`)
	bad := editMember(t, data, func(n string) bool { return n == manifestName }, func(b []byte) []byte {
		if !bytes.Contains(b, old) {
			t.Fatalf("no checkpoint at 42-abc in the manifest:\n%s", b)
		}
		return bytes.Replace(b, old, lie, 1)
	})
	bad = withIndex(t, bad, func(idx *TOC) {
		for i, d := range idx.Databases {
			if d.Summary.Name == "alpha" {
				for id, cp := range d.Summary.Checkpoints {
					idx.Databases[i].Summary.Checkpoints[id] = bytes.Replace(cp, []byte(`"42-abc"`), []byte(`"99-abc"`), 1)
				}
			}
		}
	})
	mustFail(t, bad, ErrManifest, manifestName)
}
