package replicate

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

const helloB64 = "aGVsbG8=" // "hello"

func TestParseDoc_SplicesAttachments(t *testing.T) {
	att := `{"t.txt":{"content_type":"text/plain","revpos":1,"digest":"md5-XUFAKrxLKna5cZ2REBfFkg==","length":5,"data":"` + helloB64 + `"}}`
	for _, c := range []struct{ name, raw, body string }{
		{"first", `{"_attachments":` + att + `,"_id":"a","_rev":"1-x","v":[1,{"_attachments":2}]}`,
			`{"_id":"a","_rev":"1-x","v":[1,{"_attachments":2}]}`},
		{"middle", `{"_id":"a","_attachments":` + att + `,"_rev":"1-x"}`,
			`{"_id":"a","_rev":"1-x"}`},
		{"last", `{"_id":"a","_rev":"1-x","_attachments":` + att + `}`,
			`{"_id":"a","_rev":"1-x"}`},
		{"spaced middle", "{\n  \"_id\": \"a\" ,\n  \"_attachments\": " + att + " ,\n  \"n\": 1.50\n}",
			"{\n  \"_id\": \"a\" ,\n  \"n\": 1.50\n}"},
		{"spaced first", "{ \"_attachments\" : " + att + " , \"_id\":\"a\"}",
			`{ "_id":"a"}`},
		{"none", `{"_id":"a","x":"\u00e9\n"}`, `{"_id":"a","x":"\u00e9\n"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseDoc([]byte(c.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(d.Body); got != c.body {
				t.Errorf("body = %q, want %q", got, c.body)
			}
			if c.name != "none" {
				if len(d.Atts) != 1 || string(d.Atts[0].Data) != "hello" {
					t.Errorf("atts = %+v", d.Atts)
				}
			}
			// The body never aliases the input.
			raw := []byte(c.raw)
			d2, _ := ParseDoc(raw)
			for i := range raw {
				raw[i] = 'X'
			}
			if string(d2.Body) != c.body {
				t.Errorf("body aliases its input")
			}
		})
	}
}

func TestParseDoc_OnlyMember(t *testing.T) {
	// ParseDoc requires _id, so an object whose only member is
	// _attachments cannot come through it: check the splice directly.
	raw := []byte(`{"_attachments":{"a":{"stub":true}}}`)
	if got := string(spliceOut(raw, 1, len(raw)-1)); got != `{}` {
		t.Errorf("spliceOut only member = %q", got)
	}
	raw = []byte(`{ "_attachments":{} }`)
	if got := string(spliceOut(raw, 1, len(raw)-2)); got != `{ }` {
		t.Errorf("spliceOut only member, spaced = %q", got)
	}
}

func TestParseDoc_Envelope(t *testing.T) {
	raw := `{"_id":"x","_rev":"3-ccc","_deleted":true,"_revisions":{"start":3,"ids":["ccc","bbb","aaa"]},"k":1}`
	d, err := ParseDoc([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "x" || d.Rev != "3-ccc" || !d.Deleted || d.Revisions.Start != 3 || strings.Join(d.Revisions.IDs, ",") != "ccc,bbb,aaa" {
		t.Errorf("doc = %+v", d)
	}
	if string(d.Body) != raw {
		t.Errorf("body changed: %s", d.Body)
	}
	// Without _revisions the rev itself is the history.
	d, err = ParseDoc([]byte(`{"_id":"x","_rev":"7-abc"}`))
	if err != nil || d.Revisions.Start != 7 || len(d.Revisions.IDs) != 1 || d.Revisions.IDs[0] != "abc" {
		t.Errorf("revisions = %+v, %v", d.Revisions, err)
	}
	// _deleted of any other value is not a deletion, and never confuses
	// the parse.
	d, err = ParseDoc([]byte(`{"_deleted":{"_id":"inner"},"_id":"outer"}`))
	if err != nil || d.ID != "outer" || d.Deleted {
		t.Errorf("doc = %+v, %v", d, err)
	}
}

func TestParseDoc_Errors(t *testing.T) {
	for _, raw := range []string{
		``,
		`[]`,
		`"x"`,
		`{"_rev":"1-a"}`,
		`{"_id":1}`,
		`{"_id":"a"} {"_id":"b"}`,
		`{"_id":"a"}x`,
		`{"_id":"a","_id":"b"}`,
		`{"_id":"a","_attachments":[]}`,
		`{"_id":"a","_attachments":{"x":1}}`,
		`{"_id":"a","_attachments":{"x":{"content_type":{"a":"b"}}}}`,
		`{"_id":"a","_attachments":{"x":{"length":"5"}}}`,
		`{"_id":"a","_attachments":{"x":{"data":"!!notbase64"}}}`,
		`{"_id":"a","_revisions":{"start":"1","ids":[]}}`,
		`{"_id":"a","_revisions":{"start":1,"ids":[1]}}`,
		`{"_id":"a",`,
	} {
		if d, err := ParseDoc([]byte(raw)); err == nil {
			t.Errorf("ParseDoc(%s) = %+v, want an error", raw, d)
		}
	}
}

func TestParseDoc_AttachmentFields(t *testing.T) {
	raw := `{"_id":"a","_attachments":{
		"gz.txt":{"content_type":"text/plain","revpos":2,"digest":"md5-abc","length":100,"encoding":"gzip","encoded_length":40,"stub":true},
		"f.bin":{"content_type":"application/octet-stream","revpos":3,"digest":"md5-def","length":7,"follows":true},
		"i.txt":{"content_type":"text/plain","revpos":1,"data":"` + helloB64 + `"}}}`
	d, err := ParseDoc([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Atts) != 3 {
		t.Fatalf("%d atts", len(d.Atts))
	}
	gz, f, in := d.Atts[0], d.Atts[1], d.Atts[2]
	if gz.Name != "gz.txt" || gz.Encoding != "gzip" || gz.Length != 100 || gz.EncodedLength != 40 || gz.StoredLength() != 40 || gz.RevPos != 2 || gz.Data != nil || gz.Stub {
		t.Errorf("gz = %+v", gz)
	}
	if f.Data != nil || f.Length != 7 || f.RevPos != 3 {
		t.Errorf("follows = %+v", f)
	}
	if string(in.Data) != "hello" || in.Length != 5 {
		t.Errorf("inline = %+v", in)
	}
	if got := d.PendingBytes(); got != 47 {
		t.Errorf("PendingBytes = %d, want 47", got)
	}
}

func TestAppendJSON_Modes(t *testing.T) {
	d := &Doc{
		ID: "a", Rev: "2-b",
		Body: []byte(`{"_id":"a","_rev":"2-b","v":1}`),
		Atts: []*Attachment{
			{Name: "in.txt", ContentType: "text/plain", Digest: "md5-XUFAKrxLKna5cZ2REBfFkg==", Length: 5, RevPos: 2, Data: []byte("hello")},
			{Name: "gz", ContentType: "text/plain", Digest: "md5-gz", Length: 100, EncodedLength: 3, Encoding: "gzip", RevPos: 2, Data: []byte{1, 2, 3}},
			{Name: "old", ContentType: "image/png", Digest: "md5-old", Length: 9, RevPos: 1, Stub: true},
			{Name: "unread", ContentType: "image/png", Digest: "md5-unread", Length: 9, RevPos: 1},
		},
	}
	inline := string(d.AppendJSON(nil, Inline))
	wantInline := `{"_id":"a","_rev":"2-b","v":1,"_attachments":{` +
		`"in.txt":{"content_type":"text/plain","revpos":2,"data":"aGVsbG8="},` +
		`"gz":{"content_type":"text/plain","revpos":2,"data":"AQID"},` +
		`"old":{"content_type":"image/png","revpos":1,"digest":"md5-old","length":9,"stub":true},` +
		`"unread":{"content_type":"image/png","revpos":1,"digest":"md5-unread","length":9,"stub":true}}}`
	if inline != wantInline {
		t.Errorf("inline:\n got %s\nwant %s", inline, wantInline)
	}
	follows := string(d.AppendJSON([]byte("prefix:"), Follows))
	wantFollows := `prefix:{"_id":"a","_rev":"2-b","v":1,"_attachments":{` +
		`"in.txt":{"content_type":"text/plain","revpos":2,"follows":true,"digest":"md5-XUFAKrxLKna5cZ2REBfFkg==","length":5},` +
		`"gz":{"content_type":"text/plain","revpos":2,"follows":true,"digest":"md5-gz","length":100,"encoding":"gzip","encoded_length":3},` +
		`"old":{"content_type":"image/png","revpos":1,"digest":"md5-old","length":9,"stub":true},` +
		`"unread":{"content_type":"image/png","revpos":1,"digest":"md5-unread","length":9,"stub":true}}}`
	if follows != wantFollows {
		t.Errorf("follows:\n got %s\nwant %s", follows, wantFollows)
	}
	// Without attachments the body goes out as is.
	d.Atts = nil
	if got := string(d.AppendJSON(nil, Inline)); got != string(d.Body) {
		t.Errorf("no atts: %s", got)
	}
}

// Parse, write back, parse again: same envelope, same body bytes, same
// attachment bytes; in both modes the output is valid JSON.
func TestAppendJSON_RoundTrip(t *testing.T) {
	bodies := []string{
		`{"_id":"a","_rev":"1-x","_attachments":{"t.txt":{"content_type":"text/plain","revpos":1,"data":"` + helloB64 + `"}},"z":null}`,
		`{"_attachments":{"t.txt":{"content_type":"text/plain","revpos":1,"data":"` + helloB64 + `"}},"_id":"a"}`,
		"{\n \"_id\": \"a\",\n \"_attachments\": {\"e\": {\"content_type\": \"x/y\", \"revpos\": 1, \"data\": \"\"}}\n}\n",
		`{"_id":"é/ü","_deleted":true,"_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"\"q\"":{"content_type":"a\"b","revpos":2,"digest":"md5-x","stub":true}}}`,
		`{"_id":"a" }`,
	}
	for _, raw := range bodies {
		d, err := ParseDoc([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		for _, mode := range []AttachmentMode{Inline, Follows} {
			out := d.AppendJSON(nil, mode)
			if !jsontext.Value(out).IsValid() {
				t.Fatalf("mode %d: invalid JSON %s", mode, out)
			}
			d2, err := ParseDoc(out)
			if err != nil {
				t.Fatalf("mode %d: reparse %s: %v", mode, out, err)
			}
			if !bytes.Equal(d2.Body, d.Body) || d2.ID != d.ID || d2.Rev != d.Rev || d2.Deleted != d.Deleted || len(d2.Atts) != len(d.Atts) {
				t.Errorf("mode %d: %q became %q", mode, d.Body, d2.Body)
			}
			for i, a := range d.Atts {
				b := d2.Atts[i]
				if a.Name != b.Name || a.ContentType != b.ContentType || a.RevPos != b.RevPos {
					t.Errorf("mode %d: att %+v became %+v", mode, a, b)
				}
				if mode == Inline && a.Data != nil && !bytes.Equal(a.Data, b.Data) {
					t.Errorf("inline data %q became %q", a.Data, b.Data)
				}
			}
		}
	}
}

func TestAppendJSON_EmptyBody(t *testing.T) {
	for _, body := range []string{"", "{}", "{ }", "{}\n"} {
		d := &Doc{ID: "a", Body: []byte(body), Atts: []*Attachment{{Name: "x", ContentType: "t/p", Data: []byte("1")}}}
		out := d.AppendJSON(nil, Inline)
		if !jsontext.Value(out).IsValid() {
			t.Errorf("body %q: invalid JSON %s", body, out)
		}
		if !strings.Contains(string(out), `"data":"`+base64.StdEncoding.EncodeToString([]byte("1"))+`"`) {
			t.Errorf("body %q: %s", body, out)
		}
	}
}

// TestOneLine: a server's multi-line reason is printed on one line, cut
// with its length said.
func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"plain", 10, "plain"},
		{"{badmatch,\n   {error,\n\t{pread,\"/x.couch\",einval}}}", 100, `{badmatch, {error, {pread,"/x.couch",einval}}}`},
		{"abcdefghij", 4, "abcd...(10 bytes)"},
		{"ééé", 3, "é...(6 bytes)"},
	} {
		if got := OneLine(c.in, c.max); got != c.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	e := DocError{ID: "d", Rev: "1-a", Error: "unknown_error", Reason: "line one\nline two"}
	if s := e.String(); strings.Contains(s, "\n") {
		t.Errorf("DocError.String() %q spans lines", s)
	}
}
