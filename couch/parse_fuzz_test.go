package couch

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sofadb/sofa/replicate"
)

func addTestdataSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParseChanges(f *testing.F) {
	addTestdataSeeds(f, "changes_*")
	f.Add([]byte(`{"results":[{"seq":null,"id":"a","changes":[{"rev":"1-a"}],"removed":true}],"last_seq":[1,"x"],"pending":1.5}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, parse := range []func(*bytes.Reader, func(replicate.Change) error) (ChangesEnd, error){
			func(r *bytes.Reader, fn func(replicate.Change) error) (ChangesEnd, error) { return ParseChanges(r, fn) },
			func(r *bytes.Reader, fn func(replicate.Change) error) (ChangesEnd, error) {
				return ParseContinuousChanges(r, fn)
			},
		} {
			n := 0
			end, err := parse(bytes.NewReader(body), func(c replicate.Change) error {
				n++
				if c.ID == "" || len(c.Revs) == 0 {
					t.Fatalf("row delivered without id or revs: %+v", c)
				}
				if c.Seq != nil && !jsontext.Value(c.Seq).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
					t.Fatalf("seq %q is not JSON", c.Seq)
				}
				return nil
			})
			var fe *FeedError
			if errors.As(err, &fe) && fe.Rows != n {
				t.Fatalf("FeedError says %d rows, %d delivered", fe.Rows, n)
			}
			if err == nil && end.LastSeq != nil && !jsontext.Value(end.LastSeq).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
				t.Fatalf("last_seq %q is not JSON", end.LastSeq)
			}
		}
	})
}

func FuzzParseBulkGet(f *testing.F) {
	addTestdataSeeds(f, "bulkget_*.json")
	f.Add([]byte(`{"results":[{"id":"a","docs":[{"error":{"id":"a"},"reason":"r"},{"missing":1},{}]}]}`))
	reqs := []replicate.RevRequest{{ID: "doc1", Rev: "1-a"}, {ID: "a", Rev: "2-b"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		docs, _, err := ParseBulkGet(bytes.NewReader(body), reqs)
		for _, d := range docs {
			if d.ID == "" {
				t.Fatalf("doc without id")
			}
		}
		_ = err
		// The same bytes as a _bulk_docs or _revs_diff answer must not
		// panic either.
		ParseBulkDocs(bytes.NewReader(body), []*replicate.Doc{{ID: "a", Rev: "1-a"}})
		ParseRevsDiff(bytes.NewReader(body))
		ParseError(500, body)
	})
}

func FuzzParseDoc(f *testing.F) {
	f.Add([]byte(`{"_id":"a","_rev":"1-x","_attachments":{"t.txt":{"content_type":"text/plain","revpos":1,"data":"aGVsbG8="}},"z":null}`))
	f.Add([]byte(`{"_attachments":{"t":{"stub":true,"length":3,"encoding":"gzip","encoded_length":2}},"_id":"a","_deleted":true}`))
	f.Add([]byte("{\n \"_id\": \"a\",\n \"_revisions\": {\"start\": 2, \"ids\": [\"b\", \"a\"]}\n}"))
	f.Add([]byte(`{"_id":"a","_attachments":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		d, err := replicate.ParseDoc(raw)
		if err != nil {
			return
		}
		// Bodies are carried as they are: names may repeat (but for the
		// envelope's) and strings may hold invalid UTF-8.
		if !jsontext.Value(d.Body).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) || d.Body[0] != '{' {
			t.Fatalf("body %q is not a JSON object", d.Body)
		}
		for _, mode := range []replicate.AttachmentMode{replicate.Inline, replicate.Follows} {
			out := d.AppendJSON(nil, mode)
			if !jsontext.Value(out).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
				t.Fatalf("AppendJSON(%d) = %q: invalid", mode, out)
			}
			d2, err := replicate.ParseDoc(out)
			if err != nil {
				t.Fatalf("reparse %q: %v", out, err)
			}
			if !bytes.Equal(d2.Body, d.Body) || d2.ID != d.ID || d2.Rev != d.Rev || d2.Deleted != d.Deleted || len(d2.Atts) != len(d.Atts) {
				t.Fatalf("round trip changed the doc:\n%q\n%q", d.Body, d2.Body)
			}
			if mode == replicate.Inline {
				for i, a := range d.Atts {
					if a.Data != nil && !bytes.Equal(a.Data, d2.Atts[i].Data) {
						t.Fatalf("attachment %q data changed", a.Name)
					}
				}
			}
		}
	})
}
