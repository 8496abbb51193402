package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// TestIndexReadsGroupsAtOnce: the groups of an archive read from their
// offsets, all at once, give what a reader in order gives, attachments
// stored once in an earlier group included (every group but the first
// refers to the shared blob the first stored).
func TestIndexReadsGroupsAtOnce(t *testing.T) {
	for _, c := range []Compression{Zstd, None} {
		for _, mem := range []int64{0, 1} { // 1: one member held at a time in all
			t.Run(fmt.Sprint(c, mem), func(t *testing.T) { indexRead(t, c, mem) })
		}
	}
}

func indexRead(t *testing.T, c Compression, mem int64) {
	{
		{
			dbs := map[string][]*replicate.Doc{}
			for _, n := range hostileNames {
				dbs[n] = sampleDocs()
			}
			data := writeArchive(t, Options{Compression: c, ChunkSize: 300}, dbs, hostileNames)
			_, want := readArchive(t, data)
			x, err := Scan(bytes.NewReader(data), int64(len(data)), &ReaderOptions{BlobMemory: -1, MemberMemory: mem})
			if err != nil {
				t.Fatal(err)
			}
			if len(x.Groups()) != len(hostileNames) {
				t.Fatalf("%d groups, want %d", len(x.Groups()), len(hostileNames))
			}
			var wg sync.WaitGroup
			got := make([][]*replicate.Doc, len(x.Groups()))
			errs := make([]error, len(x.Groups()))
			for i, g := range x.Groups() {
				wg.Go(func() {
					db, err := x.OpenDB(g)
					if err != nil {
						errs[i] = err
						return
					}
					defer db.Close()
					errs[i] = db.Changes(context.Background(), nil, func(ch replicate.Change) error {
						got[i] = append(got[i], ch.Docs...)
						return nil
					})
					if s, ok := db.Summary(); errs[i] == nil && (!ok || s.Name != g.Name) {
						t.Errorf("%q: no end summary", g.Name)
					}
				})
			}
			wg.Wait()
			for i, g := range x.Groups() {
				if errs[i] != nil {
					t.Fatalf("%q: %v", g.Name, errs[i])
				}
				equalDocs(t, g.Name, got[i], want[g.Name].docs)
			}
			if x.gate.used != 0 {
				t.Errorf("%d bytes still held after every reader closed", x.gate.used)
			}
		}
	}
}

// TestIndexDamage: a damaged doc chunk fails its own group's reader only
// (named, ErrChecksum); a damaged manifest fails the scan.
func TestIndexDamage(t *testing.T) {
	dbs := map[string][]*replicate.Doc{"a": sampleDocs(), "b": sampleDocs()}
	data := writeArchive(t, Options{Compression: None, ChunkSize: 300}, dbs, []string{"a", "b"})
	bad := bytes.Clone(data)
	i := bytes.Index(bad, []byte(`"conflicted"`))
	if i < 0 {
		t.Fatal("no record found")
	}
	bad[i+1] ^= 0x20 // first group's first chunk
	x, err := Scan(bytes.NewReader(bad), int64(len(bad)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range x.Groups() {
		db, err := x.OpenDB(g)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Changes(context.Background(), nil, func(replicate.Change) error { return nil })
		db.Close()
		if (g.Name == "a") != errors.Is(err, ErrChecksum) {
			t.Errorf("%s: %v", g.Name, err)
		}
	}
	bad = bytes.Clone(data)
	j := bytes.LastIndex(bad, []byte(`"totals"`))
	bad[j+1] ^= 0x20
	if _, err := Scan(bytes.NewReader(bad), int64(len(bad)), nil); !errors.Is(err, ErrChecksum) {
		t.Errorf("damaged manifest: %v", err)
	}
}
