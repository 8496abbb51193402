package couch

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sofadb/sofa/replicate"
)

func TestParseBulkDocs_OnlyFailures(t *testing.T) {
	errs, err := ParseBulkDocs(bytes.NewReader(readTestdata(t, "bulkdocs_couch_failures.json")), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []replicate.DocError{
		{ID: "_design/x", Rev: "1-967a00dff5e02add41819138abb3284d", Error: "unauthorized", Reason: "You are not a db or server admin."},
		{ID: "vdu", Rev: "2-7051cbe5c8faecd085a3fa619e6e6337", Error: "forbidden", Reason: "only admins may delete"},
	}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	errs, err = ParseBulkDocs(bytes.NewReader(readTestdata(t, "bulkdocs_couch_ok.json")), nil)
	if err != nil || len(errs) != 0 {
		t.Errorf("[] gave %v, %v", errs, err)
	}
}

func TestParseBulkDocs_PouchDB(t *testing.T) {
	sent := []*replicate.Doc{
		{ID: "c", Rev: "1-fe1daf91764e7e306f8f3fb811c735ce"},
		{ID: "a", Rev: "3-aaa"},
		{ID: "a", Rev: "3-bbb"},
		{ID: "z", Rev: "1-zzz"},
	}
	errs, err := ParseBulkDocs(bytes.NewReader(readTestdata(t, "bulkdocs_pouch.json")), sent)
	if err != nil {
		t.Fatal(err)
	}
	// The failure names id "a" without a rev: both sent revs of "a" are
	// reported, none of the others.
	want := []replicate.DocError{
		{ID: "a", Rev: "3-aaa", Error: "conflict", Reason: "Document update conflict"},
		{ID: "a", Rev: "3-bbb", Error: "conflict", Reason: "Document update conflict"},
	}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseBulkDocs_PouchRawError(t *testing.T) {
	body := `[{"status":403,"name":"forbidden","message":"nope","error":true,"id":"x","rev":"1-x"},{"ok":true,"id":"y","rev":"1-y","error":false}]`
	errs, err := ParseBulkDocs(strings.NewReader(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []replicate.DocError{{ID: "x", Rev: "1-x", Error: "forbidden", Reason: "nope"}}; !cmp.Equal(want, errs) {
		t.Errorf("errs = %+v", errs)
	}
}

func TestParseBulkDocs_ErrorBody(t *testing.T) {
	_, err := ParseBulkDocs(strings.NewReader(`{"error":"bad_request","reason":"Invalid rev format"}`), nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "bad_request" || ce.Reason != "Invalid rev format" {
		t.Errorf("err = %v", err)
	}
	for _, body := range []string{``, `[`, `[{"id":"a"`, `"x"`, `{"ok":true}`} {
		if _, err := ParseBulkDocs(strings.NewReader(body), nil); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
}

func TestParseRevsDiff(t *testing.T) {
	got, err := ParseRevsDiff(bytes.NewReader(readTestdata(t, "revsdiff.json")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]replicate.Missing{
		"190f721ca3411be7aa9477db5f948bbb": {
			Missing:           []string{"3-bb72a7682290f94a985f7afac8b27137", "4-10265e5a26d807a3cfa459cf1a82ef2e", "5-067a00dff5e02add41819138abb3284d"},
			PossibleAncestors: []string{"3-feb64b3c4a9b4cc9a0a04c2a7cd5c8bb"},
		},
		// a document named "error" is an entry, not an error answer
		"error": {Missing: []string{"1-a"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	_, err = ParseRevsDiff(strings.NewReader(`{"error":"unauthorized","reason":"You are not authorized to access this db."}`))
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "unauthorized" {
		t.Errorf("err = %v", err)
	}
	if got, err := ParseRevsDiff(strings.NewReader(`{}`)); err != nil || len(got) != 0 {
		t.Errorf("{} gave %v, %v", got, err)
	}
}

func TestParseError(t *testing.T) {
	e := ParseError(404, []byte(`{"error":"not_found","reason":"missing"}`))
	if e.Status != 404 || e.Name != "not_found" || e.Reason != "missing" {
		t.Errorf("got %+v", e)
	}
	e = ParseError(413, []byte(`{"error":"document_too_large","reason":{"id":"big"}}`))
	if e.Name != "document_too_large" || e.Reason != `{"id":"big"}` {
		t.Errorf("got %+v", e)
	}
	e = ParseError(502, []byte("<html>Bad Gateway</html>"))
	if e.Status != 502 || e.Name != "" || e.Reason != "<html>Bad Gateway</html>" {
		t.Errorf("got %+v", e)
	}
	long := strings.Repeat("x", 1000)
	if e = ParseError(500, []byte(long)); len(e.Reason) > 210 {
		t.Errorf("reason not shortened: %d bytes", len(e.Reason))
	}
}
