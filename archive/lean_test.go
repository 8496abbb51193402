package archive

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/sofadb/sofa/replicate"
)

// chunkRecords returns every record of an archive's doc chunks (stored
// as is or zstd), field name -> raw value, in order.
func chunkRecords(t *testing.T, data []byte) []map[string]json.RawMessage {
	t.Helper()
	var out []map[string]json.RawMessage
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(h.Name, "/docs-") {
			continue
		}
		var r io.Reader = tr
		if strings.HasSuffix(h.Name, ".zst") {
			z, err := zstd.NewReader(tr)
			if err != nil {
				t.Fatal(err)
			}
			defer z.Close()
			r = z
		}
		dec := json.NewDecoder(r)
		for dec.More() {
			var rec map[string]json.RawMessage
			if err := dec.Decode(&rec); err != nil {
				t.Fatalf("%s: %v", h.Name, err)
			}
			out = append(out, rec)
		}
	}
}

func fields(rec map[string]json.RawMessage) string {
	var names []string
	for _, k := range []string{"id", "rev", "deleted", "revisions", "atts", "body"} {
		if _, ok := rec[k]; ok {
			names = append(names, k)
		}
	}
	return strings.Join(names, ",")
}

// A writer leaves to the body what the body says, and only that; the
// reader gets every revision back exactly.
func TestLeanRecords(t *testing.T) {
	one := func(id, rev string, deleted bool, body string, revs ...string) *replicate.Doc {
		gen := replicate.Generation(rev)
		if len(revs) == 0 {
			gen = 0 // unknown history reads back as the zero Revisions
		}
		return &replicate.Doc{ID: id, Rev: rev, Deleted: deleted, Body: []byte(body),
			Revisions: replicate.Revisions{Start: gen, IDs: revs}}
	}
	cases := []struct {
		name   string
		doc    *replicate.Doc
		fields string // record fields the writer emits
	}{
		{"first generation", one("a", "1-x", false, `{"_id":"a","_rev":"1-x","v":1}`, "x"), "body"},
		{"history cut to the rev", one("a", "5-x", false, `{"_id":"a","_rev":"5-x"}`, "x"), "body"},
		{"longer history", one("a", "2-y", false, `{"_id":"a","_rev":"2-y"}`, "y", "x"), "revisions,body"},
		{"body _revisions equal", one("a", "2-y", false, `{"_id":"a","_rev":"2-y","_revisions":{"start":2,"ids":["y","x"]}}`, "y", "x"), "body"},
		{"body _revisions differ", one("a", "2-y", false, `{"_id":"a","_rev":"2-y","_revisions":{"start":2,"ids":["y","z"]}}`, "y", "x"), "revisions,body"},
		{"body _revisions malformed", one("a", "2-y", false, `{"_id":"a","_rev":"2-y","_revisions":{"start":"two"}}`, "y", "x"), "id,rev,revisions,body"},
		{"body _revisions not an object", one("a", "2-y", false, `{"_id":"a","_rev":"2-y","_revisions":[1]}`, "y", "x"), "id,rev,revisions,body"},
		{"tombstone with _deleted", one("a", "2-y", true, `{"_id":"a","_rev":"2-y","_deleted":true}`, "y", "x"), "revisions,body"},
		{"tombstone without _deleted", one("a", "1-y", true, `{"_id":"a","_rev":"1-y"}`, "y"), "deleted,body"},
		{"_deleted true but live", one("a", "1-y", false, `{"_id":"a","_rev":"1-y","_deleted":true}`, "y"), "deleted,body"},
		{"escaped _id", one("a/b", "1-x", false, `{"_id":"a\/b","_rev":"1-x"}`, "x"), "body"},
		{"whitespace", one("ws", "1-x", false, "{ \"_rev\" : \"1-x\",\n \"_id\":\"ws\" }", "x"), "body"},
		{"unknown history", one("a", "1-x", false, `{"_id":"a","_rev":"1-x"}`), "id,rev,body"},
		{"no _id in body", one("a", "1-x", false, `{"_rev":"1-x"}`, "x"), "id,rev,revisions,body"},
		{"other _id in body", one("a", "1-x", false, `{"_id":"b","_rev":"1-x"}`, "x"), "id,rev,revisions,body"},
		{"other _rev in body", one("a", "1-x", false, `{"_id":"a","_rev":"1-z"}`, "x"), "id,rev,revisions,body"},
		{"duplicate _id", one("a", "1-x", false, `{"_id":"a","_rev":"1-x","_id":"a"}`, "x"), "id,rev,revisions,body"},
		{"_id not a string", one("1", "1-x", false, `{"_id":1,"_rev":"1-x"}`, "x"), "id,rev,revisions,body"},
		{"_id an object", one("a", "1-x", false, `{"_id":{"a":1},"_rev":"1-x"}`, "x"), "id,rev,revisions,body"},
		{"nested _id only", one("a", "1-x", false, `{"x":{"_id":"a","_rev":"1-x"}}`, "x"), "id,rev,revisions,body"},
		{"malformed rev", one("a", "x", false, `{"_id":"a","_rev":"x"}`, "x"), "revisions,body"},
	}
	// one database per case: several cases share an id and rev, which
	// a group stores once
	dbs, order := map[string][]*replicate.Doc{}, []string(nil)
	for i, c := range cases {
		name := fmt.Sprintf("db%02d", i)
		dbs[name], order = []*replicate.Doc{c.doc}, append(order, name)
	}
	data := writeArchive(t, Options{Compression: None, Version: 2}, dbs, order)
	recs := chunkRecords(t, data)
	if len(recs) != len(cases) {
		t.Fatalf("%d records, want %d", len(recs), len(cases))
	}
	for i, c := range cases {
		if got := fields(recs[i]); got != c.fields {
			t.Errorf("%s: record has %s, want %s", c.name, got, c.fields)
		}
	}
	_, got := readArchive(t, data)
	for _, name := range order {
		equalDocs(t, name, got[name].docs, dbs[name])
	}
}

// The reader still reads an archive written before lean records existed
// (every record with id and rev): testdata/full-records.sofa holds sampleDocs() as
// database "db", written by the writer of commit 0560b9b.
func TestReadsFullRecordArchive(t *testing.T) {
	data, err := os.ReadFile("testdata/full-records.sofa")
	if err != nil {
		t.Fatal(err)
	}
	h, got := readArchive(t, data)
	if h.Version != 1 {
		t.Fatalf("fixture is version %d", h.Version)
	}
	for _, rec := range chunkRecords(t, data) {
		if _, ok := rec["rev"]; !ok {
			t.Fatalf("fixture holds a lean record: %s", fields(rec))
		}
	}
	equalDocs(t, "db", got["db"].docs, sampleDocs())
	if _, err := Verify(bytes.NewReader(data), nil); err != nil {
		t.Fatal(err)
	}
}

// Records the writer never produces: the reader refuses them rather than
// guess.
func TestLeanRecordErrors(t *testing.T) {
	for _, c := range []struct{ rec, want string }{
		{`{"body":{"_rev":"1-x"}}`, "no unambiguous _id and _rev"},
		{`{"body":{"_id":"a","_rev":"1-x","_id":"b"}}`, "no unambiguous _id and _rev"},
		{`{"body":{"_id":"a","_rev":"x"}}`, "malformed"},
		{`{"id":"a","body":{"_id":"a","_rev":"1-x"}}`, "lacks id, rev or body"},
		{`{"rev":"1-x","body":{"_id":"a","_rev":"1-x"}}`, "lacks id, rev or body"},
		{`{"id":"a","rev":"1-x"}`, "lacks id, rev or body"},
	} {
		err := decodeRecords([]byte(c.rec), func(*replicate.Doc, []attRef) error { return nil })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.rec, err, c.want)
		}
	}
	// what a lean record lacks comes from the body, what it has wins
	var got *replicate.Doc
	err := decodeRecords([]byte(`{"deleted":false,"revisions":{"start":3,"ids":["x","w"]},"body":{"_id":"a","_rev":"3-x","_deleted":true,"_revisions":{"start":3,"ids":["x"]}}}`),
		func(d *replicate.Doc, _ []attRef) error { got = d; return nil })
	if err != nil || got.ID != "a" || got.Rev != "3-x" || got.Deleted || got.Revisions.Start != 3 || strings.Join(got.Revisions.IDs, ",") != "x,w" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
