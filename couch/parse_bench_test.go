package couch

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/dataset"
	"github.com/sofadb/sofa/replicate"
)

// changesFeed is a feed=normal answer of n rows with CouchDB 3.x-sized
// opaque seqs.
func changesFeed(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"results":[` + "\n")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"seq":"%d-g1AAAAFReJzLYWBg4MhgTmHgz8tPSTV0MDQy1zMAQsMcoARTIkOS_P___7MSGXAqSVIAkkn2IFUZzIlMuUAB9hRDAzNLA1NsenAakcACJOsPUJBsD1FnaJZkmZyUiE1PFgBQ5SUF","id":"doc-%08d","changes":[{"rev":"1-967a00dff5e02add41819138abb3284d"}]`, i+1, i)
		if i%10 == 0 {
			b.WriteString(`,"deleted":true`)
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(&b, "\n],\n"+`"last_seq":"%d-g1AAAA","pending":0}`+"\n", n)
	return b.Bytes()
}

// bulkGetAnswer is a JSON _bulk_get answer of n documents of about size
// bytes each.
func bulkGetAnswer(n, size int) []byte {
	filler := strings.Repeat("x", size-220)
	var b bytes.Buffer
	b.WriteString(`{"results":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"doc-%08d","docs":[{"ok":{"_id":"doc-%08d","_rev":"2-7051cbe5c8faecd085a3fa619e6e6337","_revisions":{"start":2,"ids":["7051cbe5c8faecd085a3fa619e6e6337","967a00dff5e02add41819138abb3284d"]},"n":%d,"text":"%s"}}]}`, i, i, i, filler)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func BenchmarkParseChanges10k(b *testing.B) {
	body := changesFeed(10000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		rows := 0
		_, err := ParseChanges(bytes.NewReader(body), func(replicate.Change) error {
			rows++
			return nil
		})
		if err != nil || rows != 10000 {
			b.Fatal(rows, err)
		}
	}
}

func BenchmarkParseBulkGet1k(b *testing.B) {
	body := bulkGetAnswer(1000, 1024)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		docs := 0
		_, err := ReadBulkGet(bytes.NewReader(body), nil, func(*replicate.Doc) error {
			docs++
			return nil
		})
		if err != nil || docs != 1000 {
			b.Fatal(docs, err)
		}
	}
}

// synthBulkGet is a JSON _bulk_get answer of the first n revisions of
// the benchmarks' synthetic 1 KiB documents (internal/dataset), as CouchDB
// 3.5 sends it, wrapped in an answer as Client.do hands it over.
func synthBulkGet(tb testing.TB, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"results":[`)
	i := 0
	err := dataset.Synth{Name: "bench", Docs: n, MinSize: 1024, Seed: 1}.DB().Each(func(rev []byte) error {
		d, err := replicate.ParseDoc(rev)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		i++
		fmt.Fprintf(&b, `{"id":%q,"docs":[{"ok":`, d.ID)
		b.Write(rev)
		b.WriteString(`}]}`)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkParseBulkGetSynth500 parses one _bulk_get answer of 500
// synthetic 1 KiB revisions as the fetch path does: read into an answer
// (Client.do), then ReadBulkGet.
func BenchmarkParseBulkGetSynth500(b *testing.B) {
	body := synthBulkGet(b, 500)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp := &http.Response{Body: io.NopCloser(bytes.NewReader(body)), ContentLength: -1}
		if err := bufferBody(resp); err != nil {
			b.Fatal(err)
		}
		docs := 0
		_, err := ReadBulkGet(resp.Body, nil, func(*replicate.Doc) error {
			docs++
			return nil
		})
		resp.Body.Close()
		if err != nil || docs != 500 {
			b.Fatal(docs, err)
		}
	}
}
