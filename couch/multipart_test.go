package couch

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sofadb/sofa/replicate"
)

const (
	openRevsCT = `multipart/mixed; boundary="7b1596fc4940bc1be725ad67f11ec1c4"`
	bulkGetCT  = `multipart/mixed; boundary="d5a3bdd2b4e57eba41d3b1c70f5bb2a3"`
)

func md5Digest(b []byte) string {
	s := md5.Sum(b)
	return "md5-" + base64.StdEncoding.EncodeToString(s[:])
}

func attByName(d *replicate.Doc, name string) *replicate.Attachment {
	for _, a := range d.Atts {
		if a.Name == name {
			return a
		}
	}
	return nil
}

func TestReadOpenRevs_Multipart(t *testing.T) {
	docs, errs, err := ParseOpenRevs(bytes.NewReader(readTestdata(t, "openrevs_mixed.multipart")), openRevsCT, "SpaghettiWithMeatballs")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("%d docs, want 2", len(docs))
	}
	d := docs[0]
	if d.Rev != "2-c2b9ba87b8e3e3f36e4c6d6f3c5c6e2f" || len(d.Atts) != 3 {
		t.Fatalf("doc = %s %s with %d atts", d.ID, d.Rev, len(d.Atts))
	}
	// The body keeps every byte except `_attachments`.
	if bytes.Contains(d.Body, []byte("_attachments")) || !bytes.Contains(d.Body, []byte(`"description":"An Italian-American dish"`)) {
		t.Errorf("body = %s", d.Body)
	}
	recipe := attByName(d, "recipe.txt")
	if recipe.Encoding != "gzip" || recipe.EncodedLength != int64(len(recipe.Data)) || md5Digest(recipe.Data) != recipe.Digest {
		t.Errorf("recipe.txt: encoding %q, %d bytes, encoded_length %d, digest %s vs %s",
			recipe.Encoding, len(recipe.Data), recipe.EncodedLength, md5Digest(recipe.Data), recipe.Digest)
	}
	zr, err := gzip.NewReader(bytes.NewReader(recipe.Data))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if int64(len(plain)) != recipe.Length || !strings.HasPrefix(string(plain), "The quick brown fox") {
		t.Errorf("recipe.txt does not gunzip to its identity bytes")
	}
	// Sent before recipe.txt but matched by filename; holds "\r\n--".
	photo := attByName(d, "photo.png")
	if photo.Encoding != "" || int64(len(photo.Data)) != photo.Length || md5Digest(photo.Data) != photo.Digest {
		t.Errorf("photo.png: %d bytes, digest mismatch %v", len(photo.Data), md5Digest(photo.Data) != photo.Digest)
	}
	if old := attByName(d, "old.txt"); old.Data != nil || old.Digest == "" {
		t.Errorf("stub old.txt = %+v", old)
	}
	if d.PendingBytes() != 5 {
		t.Errorf("PendingBytes = %d, want 5 (the stub)", d.PendingBytes())
	}
	if !docs[1].Deleted || docs[1].Rev != "2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
		t.Errorf("second doc = %+v", docs[1])
	}
	want := []replicate.DocError{{ID: "SpaghettiWithMeatballs", Rev: "3-6bcedf1dbf3e0dbc10b3d0b2b2d2b1b5", Error: "not_found", Reason: "missing"}}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestReadOpenRevs_JSONArray(t *testing.T) {
	// PouchDB Server's answer to Accept: multipart/mixed, as text/plain.
	body := `[{"ok":{"x":1,"_attachments":{"t.txt":{"content_type":"text/plain","digest":"md5-XUFAKrxLKna5cZ2REBfFkg==","length":5,"revpos":1,"stub":true}},"_id":"a","_rev":"1-2369e9100897829385dbfb9508287e14","_revisions":{"start":1,"ids":["2369e9100897829385dbfb9508287e14"]}}},{"missing":"1-abc"}]`
	docs, errs, err := ParseOpenRevs(strings.NewReader(body), "text/plain; charset=utf-8", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].Rev != "1-2369e9100897829385dbfb9508287e14" || string(docs[0].Body) != `{"x":1,"_id":"a","_rev":"1-2369e9100897829385dbfb9508287e14","_revisions":{"start":1,"ids":["2369e9100897829385dbfb9508287e14"]}}` {
		t.Errorf("docs = %+v", docs)
	}
	if want := []replicate.DocError{{ID: "a", Rev: "1-abc", Error: "not_found", Reason: "missing"}}; !cmp.Equal(want, errs) {
		t.Errorf("errs = %+v", errs)
	}

	_, _, err = ParseOpenRevs(strings.NewReader(`{"error":"not_found","reason":"missing"}`), "application/json", "a")
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "not_found" {
		t.Errorf("err = %v", err)
	}
}

func TestReadBulkGetMultipart(t *testing.T) {
	reqs := []replicate.RevRequest{
		{ID: "a/b", Rev: "1-111"},
		{ID: "att doc", Rev: "3-333"},
		{ID: "gone", Rev: "1-967a00dff5e02add41819138abb3284d"},
		{ID: "stubonly", Rev: "2-555"},
		{ID: "later", Rev: "1-967a00dff5e02add41819138abb3284d"}, // same rev, different doc
	}
	var docs []*replicate.Doc
	errs, err := ReadBulkGetMultipart(bytes.NewReader(readTestdata(t, "bulkget_mixed.multipart")), bulkGetCT, reqs, func(d *replicate.Doc) error {
		docs = append(docs, d)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.ID+" "+d.Rev)
	}
	if diff := cmp.Diff([]string{"a/b 1-111", "att doc 3-333", "stubonly 2-555"}, got); diff != "" {
		t.Errorf("docs (-want +got):\n%s", diff)
	}
	z := attByName(docs[1], "z.bin")
	if z == nil || md5Digest(z.Data) != z.Digest || int64(len(z.Data)) != z.Length {
		t.Errorf("z.bin = %+v", z)
	}
	if a := attByName(docs[1], "a.txt"); a.Data != nil {
		t.Errorf("stub a.txt got data")
	}
	if s := attByName(docs[2], "s.txt"); s == nil || s.Data != nil {
		t.Errorf("stubonly att = %+v", s)
	}
	// The error part carries only a rev; order names the document.
	want := []replicate.DocError{{ID: "gone", Rev: "1-967a00dff5e02add41819138abb3284d", Error: "not_found", Reason: "missing"}}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestReadBulkGetMultipart_JSONFallback(t *testing.T) {
	var n int
	_, err := ReadBulkGetMultipart(bytes.NewReader(readTestdata(t, "bulkget_pouch.json")), "text/plain; charset=utf-8", nil, func(*replicate.Doc) error {
		n++
		return nil
	})
	if err != nil || n != 1 {
		t.Errorf("n = %d, err = %v", n, err)
	}
}

func TestMultipart_Truncated(t *testing.T) {
	for _, c := range []struct{ file, ct string }{
		{"openrevs_mixed.multipart", openRevsCT},
		{"bulkget_mixed.multipart", bulkGetCT},
	} {
		body := readTestdata(t, c.file)
		full := 0
		ReadOpenRevs(bytes.NewReader(body), c.ct, "x", func(*replicate.Doc) error { full++; return nil })
		for i := 0; i < len(body); i++ {
			n := 0
			_, err := ReadOpenRevs(bytes.NewReader(body[:i]), c.ct, "x", func(*replicate.Doc) error { n++; return nil })
			if err == nil && i < len(body)-2 {
				t.Errorf("%s cut at %d/%d: no error", c.file, i, len(body))
			}
			if n > full {
				t.Errorf("%s cut at %d: %d docs", c.file, i, n)
			}
		}
	}
}

func TestMultipart_LengthMismatch(t *testing.T) {
	body := bytes.Replace(readTestdata(t, "openrevs_mixed.multipart"), []byte("Content-Length: 73"), []byte("Content-Length: 74"), 1)
	_, _, err := ParseOpenRevs(bytes.NewReader(body), openRevsCT, "x")
	if err == nil || !strings.Contains(err.Error(), "recipe.txt") {
		t.Errorf("err = %v, want a length error naming recipe.txt", err)
	}
}

func testDocWithAtts() *replicate.Doc {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		io.WriteString(w, s)
		w.Close()
		return b.Bytes()
	}
	enc := gz(strings.Repeat("text ", 100))
	bin := []byte("\x00\x01\r\n--boundary\r\n\xff")
	return &replicate.Doc{
		ID: "doc with \"quotes\"", Rev: "2-bb", Revisions: replicate.Revisions{Start: 2, IDs: []string{"bb", "aa"}},
		Body: []byte(`{"_id":"doc with \"quotes\"","_rev":"2-bb","_revisions":{"start":2,"ids":["bb","aa"]},"k":"v"}`),
		Atts: []*replicate.Attachment{
			{Name: "a\"b\r\n.txt", ContentType: "text/plain", Digest: md5Digest(enc), Length: 500, EncodedLength: int64(len(enc)), Encoding: "gzip", RevPos: 2, Data: enc},
			{Name: "stub.bin", ContentType: "application/octet-stream", Digest: "md5-AAAA", Length: 9, RevPos: 1, Stub: true},
			{Name: "bin", ContentType: "", Digest: md5Digest(bin), Length: int64(len(bin)), RevPos: 2, Data: bin},
			{Name: "empty", ContentType: "text/plain", Digest: md5Digest(nil), RevPos: 2, Data: []byte{}},
		},
	}
}

func TestWriteRelated_RoundTrip(t *testing.T) {
	doc := testDocWithAtts()
	var buf bytes.Buffer
	ct, err := WriteRelated(&buf, doc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := int64(buf.Len()), RelatedLength(doc); got != want {
		t.Errorf("wrote %d bytes, RelatedLength says %d", got, want)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/related" {
		t.Fatalf("content type %q: %v", ct, err)
	}

	// Standard library reader: JSON first, then the three non-stub parts in order.
	mr := multipart.NewReader(bytes.NewReader(buf.Bytes()), params["boundary"])
	var parts [][]byte
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		parts = append(parts, b)
	}
	if len(parts) != 4 {
		t.Fatalf("%d parts, want 4", len(parts))
	}
	if !bytes.Equal(parts[0], doc.AppendJSON(nil, replicate.Follows)) {
		t.Errorf("JSON part = %s", parts[0])
	}
	for i, a := range []*replicate.Attachment{doc.Atts[0], doc.Atts[2], doc.Atts[3]} {
		if !bytes.Equal(parts[i+1], a.Data) {
			t.Errorf("part %d differs from %q", i+1, a.Name)
		}
	}

	// Our own reader gives the same revision back.
	got, err := readRelated(bytes.NewReader(buf.Bytes()), params["boundary"])
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != doc.ID || got.Rev != doc.Rev || !bytes.Equal(got.Body, doc.Body) {
		t.Errorf("doc = %s %s %s", got.ID, got.Rev, got.Body)
	}
	for i, a := range doc.Atts {
		g := got.Atts[i]
		if g.Name != a.Name || g.Digest != a.Digest || g.RevPos != a.RevPos || g.Encoding != a.Encoding {
			t.Errorf("att %d: %+v, want %+v", i, g, a)
		}
		if a.Stub {
			if g.Data != nil {
				t.Errorf("stub %q got data", a.Name)
			}
		} else if !bytes.Equal(g.Data, a.Data) || g.Data == nil {
			t.Errorf("att %q data differs", a.Name)
		}
	}

	// A RelatedBody can be read many times, always the same bytes.
	rb := NewRelatedBody(doc)
	for i := 0; i < 2; i++ {
		b, _ := io.ReadAll(rb.Reader())
		if int64(len(b)) != rb.Len() {
			t.Errorf("read %d, Len %d", len(b), rb.Len())
		}
	}
	// No header injection from names: every header line is one we wrote.
	for _, line := range strings.Split(buf.String(), "\r\n") {
		if strings.HasPrefix(line, ".txt") {
			t.Errorf("attachment name split a header line: %q", line)
		}
	}
}
