package couch

import (
	"bytes"
	"mime"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

func FuzzMultipartOpenRevs(f *testing.F) {
	f.Add(readTestdata(f, "openrevs_mixed.multipart"), openRevsCT)
	f.Add(readTestdata(f, "bulkget_mixed.multipart"), bulkGetCT)
	f.Add([]byte(`[{"ok":{"_id":"a"}},{"missing":"1-a"}]`), "application/json")
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		check := func(d *replicate.Doc) error {
			if d.ID == "" {
				t.Fatalf("doc without id")
			}
			return nil
		}
		ReadOpenRevs(bytes.NewReader(body), ct, "x", check)
		ReadBulkGetMultipart(bytes.NewReader(body), ct, []replicate.RevRequest{{ID: "a/b", Rev: "1-111"}}, check)
	})
}

// Whatever the names, types and bytes, a written body reads back the same.
func FuzzMultipartRelatedRoundTrip(f *testing.F) {
	f.Add("a.txt", "text/plain", "gzip", []byte("hello"), []byte("\r\n--x--\r\n"))
	f.Add("a\"b\r\nX: y", "", "", []byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, name, ctype, enc string, data1, data2 []byte) {
		doc := &replicate.Doc{ID: "d", Rev: "1-a", Body: []byte(`{"_id":"d","_rev":"1-a"}`), Atts: []*replicate.Attachment{
			{Name: name, ContentType: ctype, Encoding: enc, RevPos: 1, Data: data1},
			{Name: name + "2", ContentType: "x/y", RevPos: 1, Data: data2},
		}}
		var buf bytes.Buffer
		ct, err := WriteRelated(&buf, doc)
		if err != nil {
			t.Fatal(err)
		}
		if int64(buf.Len()) != RelatedLength(doc) {
			t.Fatalf("length %d, RelatedLength %d", buf.Len(), RelatedLength(doc))
		}
		_, params, err := mime.ParseMediaType(ct)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readRelated(bytes.NewReader(buf.Bytes()), params["boundary"])
		if err != nil {
			// Names the JSON cannot carry (invalid UTF-8) or that
			// AppendJSON does not escape are out of scope only if
			// ParseDoc refuses the JSON part itself.
			if _, perr := replicate.ParseDoc(doc.AppendJSON(nil, replicate.Follows)); perr != nil {
				return
			}
			t.Fatalf("read back: %v", err)
		}
		for i, a := range doc.Atts {
			if !bytes.Equal(got.Atts[i].Data, a.Data) {
				t.Fatalf("attachment %d: %q became %q", i, a.Data, got.Atts[i].Data)
			}
		}
	})
}
