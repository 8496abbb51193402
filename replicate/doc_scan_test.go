package replicate

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// tokenParseDoc is ParseDoc as it was before the scanner: every member
// tokenized by jsontext (duplicate names refused anywhere). The scanner
// must agree with it on every input without repeated names.
func tokenParseDoc(raw []byte) (*Doc, error) {
	raw = bytes.TrimSpace(raw)
	dec := jsontext.NewDecoder(bytes.NewReader(raw), docOpts...)
	tok, err := dec.ReadToken()
	if err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("not an object")
	}
	d := &Doc{}
	attStart, attEnd := int64(-1), int64(-1)
	for dec.PeekKind() != '}' {
		memberStart := dec.InputOffset()
		kt, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		key := kt.String()
		switch key {
		case "_id", "_rev":
			vt, err := dec.ReadToken()
			if err != nil || vt.Kind() != '"' {
				return nil, fmt.Errorf("%s", key)
			}
			if key == "_id" {
				d.ID = vt.String()
			} else {
				d.Rev = vt.String()
			}
		case "_deleted":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			d.Deleted = string(v) == "true"
		case "_revisions":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			if err := parseRevisions(v, &d.Revisions); err != nil {
				return nil, err
			}
		case "_attachments":
			v, err := dec.ReadValue()
			if err != nil {
				return nil, err
			}
			if d.Atts, err = parseAttachments(v); err != nil {
				return nil, err
			}
			attStart, attEnd = memberStart, dec.InputOffset()
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, err
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("data after the object")
	}
	if d.ID == "" {
		return nil, fmt.Errorf("no _id")
	}
	if attStart < 0 {
		d.Body = append([]byte(nil), raw...)
	} else {
		d.Body = spliceOut(raw, int(attStart), int(attEnd))
	}
	if len(d.Revisions.IDs) == 0 && d.Rev != "" {
		if g := Generation(d.Rev); g > 0 {
			d.Revisions = Revisions{Start: g, IDs: []string{d.Rev[strings.IndexByte(d.Rev, '-')+1:]}}
		}
	}
	return d, nil
}

var scanSeeds = []string{
	`{"_id":"a","_rev":"1-x","_attachments":{"t.txt":{"content_type":"text/plain","revpos":1,"data":"aGVsbG8="}},"z":null}`,
	`{"_attachments":{"t":{"stub":true,"length":3,"encoding":"gzip","encoded_length":2}},"_id":"a","_deleted":true}`,
	"{\n \"_id\": \"a\",\n \"_revisions\": {\"start\": 2, \"ids\": [\"b\", \"a\"]}\n}",
	`{"_id":"a","_attachments":{}}`,
	`{ "_attachments" : {} , "_id" : "a" }`,
	`{"_id":"a\"b\\","_rev":"2-\u0041","s":"x\\\"}{][","n":-1.5e3,"t":true,"f":false,"o":{"_id":"in","a":[1,{"b":"]"}]}}`,
	`{"\u005fid":"esc","_rev":"1-a"}`,
	`{"_deleted":{"_id":"inner"},"_id":"outer"}`,
	`{"_id":"a","_deleted":true,"_revisions":{"start":3,"ids":["c","b","a"],"x":[]}}`,
	`  {"_id":"a"}  `,
	`{"_id":"a"}x`,
	`{"_id":"a"} {"_id":"b"}`,
	`{"_id":1}`,
	`{"_rev":"1-a"}`,
	`[]`,
	`{"_id":"a",`,
	`{"_id":"a","_attachments":[]}`,
	`{"_id":"a","x":"\ud800"}`,
	"{\"_id\":\"a\",\"x\":\"\xff\"}",
	// _revisions: the plain shape (walked directly) and its neighbours
	`{"_id":"a","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}}`,
	`{"_id":"a","_revisions":{ "ids" : [ "b" , "a" ] , "start" : 2 }}`,
	`{"_id":"a","_revisions":{"start":1,"ids":[]}}`,
	`{"_id":"a","_revisions":{"start":1.0,"ids":["a"]}}`,
	`{"_id":"a","_revisions":{"start":1e0,"ids":["a"]}}`,
	`{"_id":"a","_revisions":{"start":-1,"ids":["a"]}}`,
	`{"_id":"a","_revisions":{"start":12345678901,"ids":["a"]}}`,
	`{"_id":"a","_revisions":{"start":"1","ids":["a"]}}`,
	`{"_id":"a","_revisions":{"start":1,"start":2,"ids":["a"]}}`,
	`{"_id":"a","_revisions":{"start":1,"ids":["\u0061"]}}`,
	`{"_id":"a","_revisions":{"start":1,"ids":["é"]}}`,
	`{"_id":"a","_revisions":{"start":1,"ids":[1]}}`,
	`{"_id":"a","_revisions":{"ids":["a"]}}`,
	`{"_id":"a","_revisions":{"start":1}}`,
}

func TestScanDoc_AgreesWithTokens(t *testing.T) {
	for _, raw := range scanSeeds {
		checkScan(t, []byte(raw))
	}
}

// checkScan: ParseDoc (validate, then scan) gives what the token parser
// gives, and on valid input ParseDocValid gives the same again.
func checkScan(t *testing.T, raw []byte) {
	t.Helper()
	want, werr := tokenParseDoc(raw)
	got, gerr := ParseDoc(raw)
	if werr != nil {
		// The token parser refuses repeated names anywhere; ParseDoc
		// only repeated envelope names.
		if gerr == nil && !jsontext.Value(bytes.TrimSpace(raw)).IsValid(docOpts...) {
			return
		}
		if gerr == nil {
			t.Fatalf("ParseDoc(%q) = %+v, token parser: %v", raw, got, werr)
		}
		return
	}
	if gerr != nil {
		t.Fatalf("ParseDoc(%q): %v; token parser accepts it", raw, gerr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseDoc(%q) = %+v\nwant %+v", raw, got, want)
	}
	valid, err := ParseDocValid(raw)
	if err != nil || !reflect.DeepEqual(valid, want) {
		t.Fatalf("ParseDocValid(%q) = %+v, %v\nwant %+v", raw, valid, err, want)
	}
}

func FuzzScanDoc(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkScan(t, raw)
		ParseDocValid(raw) // any input: no panic
	})
}

func TestParseDoc_RepeatedNames(t *testing.T) {
	d, err := ParseDoc([]byte(`{"_id":"a","x":1,"x":2,"o":{"y":1,"y":2}}`))
	if err != nil || d.ID != "a" {
		t.Fatalf("repeated non-envelope names: %+v, %v", d, err)
	}
	for _, raw := range []string{
		`{"_id":"a","_id":"a"}`, `{"_id":"a","_rev":"1-a","_rev":"1-a"}`, `{"_id":"a","_deleted":true,"_deleted":false}`,
		`{"_id":"a","_revisions":{"start":1,"ids":["a"]},"_revisions":{"start":1,"ids":["a"]}}`,
		`{"_id":"a","_attachments":{},"_attachments":{}}`, `{"_id":"a","\u005fid":"b"}`,
		`{"_id":"a","_attachments":{"f":{"length":1},"f":{"length":1}}}`,
	} {
		if d, err := ParseDoc([]byte(raw)); err == nil {
			t.Errorf("ParseDoc(%s) = %+v, want an error for the repeated name", raw, d)
		}
	}
}
