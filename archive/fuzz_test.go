package archive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// FuzzReader feeds arbitrary bytes to the reader: it must never panic,
// never hang, and never allocate beyond its member cap; whatever it
// accepts must verify.
func FuzzReader(f *testing.F) {
	small := map[string][]*replicate.Doc{"db": sampleDocs()[:4]}
	f.Add(writeArchive(f, Options{ChunkSize: 100}, small, []string{"db"}))
	f.Add(writeArchive(f, Options{Compression: None}, small, []string{"db"}))
	f.Add(writeArchive(f, Options{Compression: Gzip}, small, []string{"db"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := &ReaderOptions{MaxMemberSize: 1 << 20, BlobMemory: 1 << 20}
		rd, err := NewReader(bytes.NewReader(data), opts)
		if err != nil {
			return
		}
		defer rd.Close()
		for {
			db, err := rd.Next()
			if errors.Is(err, io.EOF) {
				// accepted: it must verify too
				if _, err := Verify(bytes.NewReader(data), opts); err != nil {
					t.Fatalf("read fully but Verify says %v", err)
				}
				return
			}
			if err != nil {
				var ae *Error
				if !errors.As(err, &ae) {
					t.Fatalf("error %v (%T) is not an *archive.Error", err, err)
				}
				return
			}
			_ = db.Changes(context.Background(), nil, func(c replicate.Change) error {
				for _, d := range c.Docs {
					for _, a := range d.Atts {
						if a.Data == nil {
							t.Fatalf("attachment %q delivered without bytes", a.Name)
						}
					}
				}
				return nil
			})
		}
	})
}

// FuzzRecords reaches the doc chunk parser directly (in FuzzReader the
// checksums stop almost every mutation first): no panics, and every
// record accepted has an id, a rev and a body that is a JSON object.
func FuzzRecords(f *testing.F) {
	var seed []byte
	var lean []byte
	for _, d := range sampleDocs() {
		sums := make([][32]byte, len(d.Atts))
		seed = appendRecord(seed, d, d.Body, sums, recordForm{})
		lean = appendRecord(lean, d, d.Body, sums, recordForm{lean: true, omitRevs: true, omitDeleted: true})
	}
	f.Add(seed)
	f.Add(lean)
	f.Add([]byte(`{"id":"a","rev":"1-a","body":{}}`))
	f.Add([]byte(`{"body":{"_id":"a","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}}`))
	f.Fuzz(func(t *testing.T, chunk []byte) {
		_ = decodeRecords(chunk, func(d *replicate.Doc, refs []attRef) error {
			if d.ID == "" || d.Rev == "" || len(d.Body) < 2 || d.Body[0] != '{' || len(refs) != len(d.Atts) {
				t.Fatalf("accepted %+v", d)
			}
			return nil
		})
	})
}
