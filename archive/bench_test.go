package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// benchDocs makes n revisions of about 1 KB each, in batches of 500.
func benchDocs(n int) [][]*replicate.Doc {
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 36)
	var batches [][]*replicate.Doc
	var batch []*replicate.Doc
	for i := range n {
		id := fmt.Sprintf("doc-%08d", i)
		body := fmt.Sprintf(`{"_id":"%s","_rev":"1-%032x","n":%d,"text":"%s"}`, id, i, i, filler)
		batch = append(batch, &replicate.Doc{ID: id, Rev: fmt.Sprintf("1-%032x", i), Body: []byte(body),
			Revisions: replicate.Revisions{Start: 1, IDs: []string{fmt.Sprintf("%032x", i)}}})
		if len(batch) == 500 {
			batches = append(batches, batch)
			batch = nil
		}
	}
	if batch != nil {
		batches = append(batches, batch)
	}
	return batches
}

func bodyBytes(batches [][]*replicate.Doc) int64 {
	var n int64
	for _, b := range batches {
		for _, d := range b {
			n += int64(len(d.Body))
		}
	}
	return n
}

func writeBench(tb testing.TB, batches [][]*replicate.Doc, c Compression) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Options{Compression: c})
	if err != nil {
		tb.Fatal(err)
	}
	d, _ := w.Database("bench")
	for _, b := range batches {
		if _, err := d.WriteDocs(context.Background(), b); err != nil {
			tb.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkWrite100k: bytes/s counts document bodies.
func BenchmarkWrite100k(b *testing.B) {
	batches := benchDocs(100_000)
	for _, c := range []Compression{Zstd, Gzip, None} {
		b.Run(string(c), func(b *testing.B) {
			b.SetBytes(bodyBytes(batches))
			b.ReportAllocs()
			var size int
			for b.Loop() {
				size = len(writeBench(b, batches, c))
			}
			b.ReportMetric(float64(size)/float64(bodyBytes(batches)), "ratio")
		})
	}
}

// BenchmarkRead100k reads and delivers every revision.
func BenchmarkRead100k(b *testing.B) {
	batches := benchDocs(100_000)
	for _, c := range []Compression{Zstd, Gzip, None} {
		b.Run(string(c), func(b *testing.B) {
			data := writeBench(b, batches, c)
			b.SetBytes(bodyBytes(batches))
			b.ReportAllocs()
			for b.Loop() {
				rd, err := NewReader(bytes.NewReader(data), nil)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					db, err := rd.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := db.Changes(context.Background(), nil, func(c replicate.Change) error { n += len(c.Docs); return nil }); err != nil {
						b.Fatal(err)
					}
				}
				rd.Close()
				if n != 100_000 {
					b.Fatalf("read %d revisions", n)
				}
			}
		})
	}
}
