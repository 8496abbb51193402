package couchtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// fixture is a small database with conflicts, a deleted leaf that keeps
// fields, attachments, a design doc, awkward ids and a 20,000-byte id.
func fixture() []json.RawMessage {
	att := func(data string) string { return base64.StdEncoding.EncodeToString([]byte(data)) }
	long := strings.Repeat("L", 20000)
	docs := []string{
		`{"_id":"plain","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"n":1,"nested":{"b":[1,2,{"c":"é"}],"a":null}}`,
		`{"_id":"conflicted","_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]},"v":"long branch"}`,
		`{"_id":"conflicted","_rev":"2-d","_revisions":{"start":2,"ids":["d","a"]},"_deleted":true,"kept":"tombstone field"}`,
		`{"_id":"conflicted","_rev":"2-e","_revisions":{"start":2,"ids":["e","a"]},"v":"short branch"}`,
		`{"_id":"gone","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_deleted":true}`,
		`{"_id":"with-att","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{` +
			`"a.txt":{"content_type":"text/plain","revpos":1,"data":"` + att("hello, world") + `"},` +
			`"b.bin":{"content_type":"application/octet-stream","revpos":2,"data":"` + att("\x00\x01\x02binary") + `"}}}`,
		`{"_id":"_design/app","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"views":{"all":{"map":"function(doc){emit(doc._id)}"}}}`,
		`{"_id":"a+b","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`,
		`{"_id":"a b","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`,
		`{"_id":"é/ü","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`,
		`{"_id":"` + long + `","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"long":true}`,
	}
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		out[i] = json.RawMessage(d)
	}
	return out
}

// twoDBs creates two databases on the shared server holding fixture() and
// returns their names.
func twoDBs(t *testing.T) (string, string) {
	t.Helper()
	s := Shared(t)
	c := s.Client()
	a, b := s.NewDB(t), s.NewDB(t)
	for _, db := range []string{a, b} {
		if _, err := c.BulkDocs(t.Context(), db, false, fixture()...); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

func TestCompareDBs_EqualCopies(t *testing.T) {
	s := Shared(t)
	a, b := twoDBs(t)
	d, err := CompareDBs(t.Context(), s.DBURL(a), s.DBURL(b), CompareOptions{Security: true, RevsLimit: true, BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Equal() {
		t.Fatalf("fixture copies differ: %s", d)
	}
	if got, want := d.Docs, 9; got != want {
		t.Errorf("Docs = %d, want %d", got, want)
	}
	if got, want := d.Revs, 11; got != want {
		t.Errorf("Revs = %d, want %d", got, want)
	}
	AssertEqual(t, s.DBURL(a), s.DBURL(b))
}

func TestCompareDBs_DetectsDifferences(t *testing.T) {
	att := func(data string) string { return base64.StdEncoding.EncodeToString([]byte(data)) }
	for _, tc := range []struct {
		name   string
		change string // written to the target with new_edits=false
		sec    any    // written to the target's _security when set
		want   string
	}{
		{name: "extra leaf", change: `{"_id":"plain","_rev":"1-z","_revisions":{"start":1,"ids":["z"]},"n":1}`,
			want: `doc "plain": leaves differ`},
		{name: "winner", change: `{"_id":"conflicted","_rev":"4-f","_revisions":{"start":4,"ids":["f","e2","e","a"]},"v":"short branch"}`,
			want: `winner differs`},
		{name: "deleted state", change: `{"_id":"plain","_rev":"2-x","_revisions":{"start":2,"ids":["x","a"]},"_deleted":true}`,
			want: `deleted differs`},
		{name: "extra doc", change: `{"_id":"new","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`,
			want: `doc "new": only on target`},
		{name: "body", change: `{"_id":"same-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"v":2}`,
			want: `doc "same-rev" rev 1-a: body differs`},
		{name: "attachment bytes", change: `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"x":{"content_type":"text/plain","revpos":1,"data":"` + att("other") + `"}}}`,
			want: `attachment "x": digest differs`},
		{name: "attachment content_type", change: `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"x":{"content_type":"text/html","revpos":1,"data":"` + att("same") + `"}}}`,
			want: `attachment "x": content_type differs`},
		{name: "history", change: `{"_id":"hist","_rev":"2-b","_revisions":{"start":2,"ids":["b","OTHER"]}}`,
			want: `_revisions differ`},
		{name: "attachment missing", change: `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`,
			want: `attachment "x": missing on target`},
		{name: "attachment length", change: `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"x":{"content_type":"text/plain","revpos":1,"data":"` + att("same, longer") + `"}}}`,
			want: `attachment "x": length differs: source 4, target 12`},
		{name: "deleted leaf body", change: `{"_id":"conflicted","_rev":"2-d","_revisions":{"start":2,"ids":["d","a"]},"_deleted":true,"kept":"other field"}`,
			want: `doc "conflicted" rev 2-d: body differs`},
		{name: "security", sec: Security{Members: Group{Names: []string{"bob"}}},
			want: `_security differs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Shared(t)
			c := s.Client()
			a, b := twoDBs(t)
			// Same-id/same-rev documents whose content differs per side.
			srcOnly := map[string]string{
				"body":                    `{"_id":"same-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"v":1}`,
				"attachment bytes":        `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"x":{"content_type":"text/plain","revpos":1,"data":"` + att("original") + `"}}}`,
				"attachment content_type": `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"x":{"content_type":"text/plain","revpos":1,"data":"` + att("same") + `"}}}`,
				"history":                 `{"_id":"hist","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}}`,
				"attachment missing":      `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"x":{"content_type":"text/plain","revpos":1,"data":"` + att("same") + `"}}}`,
				"attachment length":       `{"_id":"att-rev","_rev":"1-a","_revisions":{"start":1,"ids":["a"]},"_attachments":{"x":{"content_type":"text/plain","revpos":1,"data":"` + att("same") + `"}}}`,
			}
			// The deleted leaf of the fixture keeps a field: its body is
			// compared like a live one's. Each side gets its own copy.
			if tc.name == "deleted leaf body" {
				a, b = s.NewDB(t), s.NewDB(t)
				var docs []json.RawMessage
				for _, doc := range fixture() {
					if !strings.Contains(string(doc), `"tombstone field"`) {
						docs = append(docs, doc)
					}
				}
				for _, db := range []string{a, b} {
					if _, err := c.BulkDocs(t.Context(), db, false, docs...); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := c.BulkDocs(t.Context(), a, false, fixture()[2]); err != nil {
					t.Fatal(err)
				}
			}
			if doc, ok := srcOnly[tc.name]; ok {
				if _, err := c.BulkDocs(t.Context(), a, false, json.RawMessage(doc)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.change != "" {
				if _, err := c.BulkDocs(t.Context(), b, false, json.RawMessage(tc.change)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.sec != nil {
				if err := c.PutSecurity(t.Context(), b, tc.sec); err != nil {
					t.Fatal(err)
				}
			}
			d, err := CompareDBs(t.Context(), s.DBURL(a), s.DBURL(b), CompareOptions{Security: true})
			if err != nil {
				t.Fatal(err)
			}
			if d.Equal() {
				t.Fatalf("difference %q not detected", tc.name)
			}
			if !strings.Contains(d.String(), tc.want) {
				t.Errorf("diff does not mention %q:\n%s", tc.want, d)
			}
		})
	}
}

func TestCompareDBs_MissingDocAndCap(t *testing.T) {
	s := Shared(t)
	c := s.Client()
	a, b := s.NewDB(t), s.NewDB(t)
	var docs []json.RawMessage
	for i := range 30 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"d%02d","_rev":"1-a","_revisions":{"start":1,"ids":["a"]}}`, i)))
	}
	if _, err := c.BulkDocs(t.Context(), a, false, docs...); err != nil {
		t.Fatal(err)
	}
	d, err := CompareDBs(t.Context(), s.DBURL(a), s.DBURL(b), CompareOptions{MaxItems: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Total, 30; got != want {
		t.Errorf("Total = %d, want %d", got, want)
	}
	if got, want := len(d.Items), 5; got != want {
		t.Errorf("len(Items) = %d, want %d", got, want)
	}
	if !strings.Contains(d.String(), `doc "d00": missing on target`) || !strings.Contains(d.String(), "and 25 more") {
		t.Errorf("unexpected diff text:\n%s", d)
	}
}

func TestCompareDBs_SecurityNormalized(t *testing.T) {
	s := Shared(t)
	c := s.Client()
	a, b := s.NewDB(t), s.NewDB(t)
	if err := c.PutSecurity(t.Context(), a, map[string]any{"members": map[string]any{"names": []string{"y", "x"}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecurity(t.Context(), b, Security{Members: Group{Names: []string{"x", "y"}}}); err != nil {
		t.Fatal(err)
	}
	AssertEqual(t, s.DBURL(a), s.DBURL(b), CompareOptions{Security: true})
}

// A copy whose attachment revpos differs (same bytes, same revision) is
// reported; PouchDBRevpos forgives it only when the target is PouchDB
// Server, which resets revpos to the revision's generation.
func TestCompareDBs_Revpos(t *testing.T) {
	att := base64.StdEncoding.EncodeToString([]byte("same bytes"))
	s := Shared(t)
	c := s.Client()
	a, b := s.NewDB(t), s.NewDB(t)
	// source: x introduced at generation 1, kept as a stub by an edit
	rev, err := c.PutAttachment(t.Context(), a, "doc", "", "x", "text/plain", []byte("same bytes"))
	if err != nil {
		t.Fatal(err)
	}
	var first map[string]any
	if err := c.GetJSON(t.Context(), "/"+a+"/doc?rev="+rev, &first); err != nil {
		t.Fatal(err)
	}
	first["v"] = 2 // the attachment stays as the stub just read
	if _, err := c.PutDoc(t.Context(), a, "doc", first); err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := c.GetJSON(t.Context(), "/"+a+"/doc?revs=true", &doc); err != nil {
		t.Fatal(err)
	}
	// target: that revision written with the bytes and revpos 2
	if _, err := c.BulkDocs(t.Context(), b, false,
		json.RawMessage(fmt.Sprintf(`{"_id":"doc","_rev":%s,"_revisions":%s,"v":2,"_attachments":{"x":{"content_type":"text/plain","revpos":2,"data":"%s"}}}`,
			doc["_rev"], doc["_revisions"], att))); err != nil {
		t.Fatal(err)
	}
	d, err := CompareDBs(t.Context(), s.DBURL(a), s.DBURL(b), CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.String(), `attachment "x": revpos differs: source 1, target 2`) {
		t.Fatalf("revpos difference not reported:\n%s", d)
	}
	d, err = CompareDBs(t.Context(), s.DBURL(a), s.DBURL(b), CompareOptions{PouchDBRevpos: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind == PouchDB && !d.Equal() {
		t.Errorf("PouchDBRevpos on a PouchDB Server target: %s", d)
	}
	if s.Kind != PouchDB && !strings.Contains(d.String(), "revpos differs") {
		t.Errorf("PouchDBRevpos forgave a revpos difference on a %s target:\n%s", s.Kind, d)
	}
}

// _revs_limit and _security are compared with non-default values on both
// sides (CouchDB: PouchDB Server has no _revs_limit and compares its
// _security in TestCompareDBs_DetectsDifferences).
func TestCompareDBs_RevsLimitAndSecurity(t *testing.T) {
	RequireKind(t, CouchDB, "PouchDB Server has no _revs_limit")
	s := Shared(t)
	c := s.Client()
	a, b := s.NewDB(t), s.NewDB(t)
	sec := Security{Admins: Group{Roles: []string{"ops"}}, Members: Group{Names: []string{"alice"}}}
	for _, db := range []string{a, b} {
		if err := c.PutJSON(t.Context(), "/"+db+"/_revs_limit", 7, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.PutSecurity(t.Context(), db, sec); err != nil {
			t.Fatal(err)
		}
	}
	opts := CompareOptions{RevsLimit: true, Security: true}
	AssertEqual(t, s.DBURL(a), s.DBURL(b), opts)
	if err := c.PutJSON(t.Context(), "/"+b+"/_revs_limit", 9, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.PutSecurity(t.Context(), b, Security{Admins: Group{Roles: []string{"ops"}}, Members: Group{Names: []string{"bob"}}}); err != nil {
		t.Fatal(err)
	}
	d, err := CompareDBs(t.Context(), s.DBURL(a), s.DBURL(b), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"_revs_limit differs: source 7, target 9", "_security differs"} {
		if !strings.Contains(d.String(), want) {
			t.Errorf("diff does not mention %q:\n%s", want, d)
		}
	}
	// A 404 from a CouchDB database is a failure, not "no such route".
	if _, err := CompareDBs(t.Context(), s.DBURL(a), s.DBURL("no-such-db"), CompareOptions{RevsLimit: true}); err == nil {
		t.Error("compare with a missing CouchDB database succeeded")
	}
}
