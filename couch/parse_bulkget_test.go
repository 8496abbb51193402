package couch

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sofadb/sofa/replicate"
)

func TestParseBulkGet_CouchDB(t *testing.T) {
	reqs := []replicate.RevRequest{
		{ID: "doc1", Rev: "4-753875d51501a6b1883a9d62b4d33f91"},
		{ID: "doc1", Rev: "2-2ee767305024673cfb3f5af037cd2729"},
		{ID: "doc2", Rev: "1-5e9d3a2b1c0d4e5f6a7b8c9d0e1f2a3b"},
		{ID: "doc3", Rev: "1-00000000000000000000000000000000"},
		{ID: "doc4", Rev: "7-4444"},
	}
	docs, errs, err := ParseBulkGet(bytes.NewReader(readTestdata(t, "bulkget_couch.json")), reqs)
	if err != nil {
		t.Fatal(err)
	}
	var revs []string
	for _, d := range docs {
		revs = append(revs, d.ID+" "+d.Rev)
	}
	wantRevs := []string{
		"doc1 4-753875d51501a6b1883a9d62b4d33f91",
		// one result holding two docs (latest on a branched rev)
		"doc1 3-b2e1d5ad4b5b3b8c5b2f1a4e0c2b6e8d",
		"doc1 3-c3f2e6be5c6c4c9d6c3f2b5f1d3c7f9e",
		"doc2 1-5e9d3a2b1c0d4e5f6a7b8c9d0e1f2a3b",
	}
	if diff := cmp.Diff(wantRevs, revs); diff != "" {
		t.Errorf("docs (-want +got):\n%s", diff)
	}
	if !docs[2].Deleted || docs[1].Deleted {
		t.Errorf("deleted flags: %v %v", docs[1].Deleted, docs[2].Deleted)
	}
	if got := docs[0].Revisions; got.Start != 4 || len(got.IDs) != 4 {
		t.Errorf("_revisions = %+v", got)
	}
	if a := docs[3].Atts; len(a) != 1 || string(a[0].Data) != "hello" || a[0].Name != "hello.txt" {
		t.Errorf("inline attachment = %+v", a)
	}
	wantErrs := []replicate.DocError{
		{ID: "doc3", Rev: "1-00000000000000000000000000000000", Error: "not_found", Reason: "missing"},
		// "undefined" rev replaced by the requested one
		{ID: "doc4", Rev: "7-4444", Error: "forbidden", Reason: "You are not allowed to access this db."},
	}
	if diff := cmp.Diff(wantErrs, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestParseBulkGet_PouchDB(t *testing.T) {
	reqs := []replicate.RevRequest{
		{ID: "a", Rev: "9-zzz"},
		{ID: "nope", Rev: "1-abc"},
		{ID: "b"},
		{ID: "nope2", Rev: "3-ccc"},
		{ID: "flat", Rev: "2-fff"},
	}
	docs, errs, err := ParseBulkGet(bytes.NewReader(readTestdata(t, "bulkget_pouch.json")), reqs)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].ID != "b" || docs[0].Rev != "1-02e4a57116cc4afba3ef5b47253320ea" {
		t.Errorf("docs = %+v", docs)
	}
	if got, want := string(docs[0].Body), `{"y":2,"_id":"b","_rev":"1-02e4a57116cc4afba3ef5b47253320ea","_revisions":{"start":1,"ids":["02e4a57116cc4afba3ef5b47253320ea"]}}`; got != want {
		t.Errorf("body = %s", got)
	}
	wantErrs := []replicate.DocError{
		{ID: "a", Rev: "9-zzz", Error: "not_found", Reason: "missing"},
		{ID: "nope", Rev: "1-abc", Error: "not_found", Reason: "missing"},
		{ID: "nope2", Rev: "3-ccc", Error: "not_found", Reason: "missing"},
		{ID: "flat", Rev: "2-fff", Error: "not_found", Reason: "missing"},
	}
	if diff := cmp.Diff(wantErrs, errs); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestParseBulkGet_IDAfterDocs(t *testing.T) {
	body := `{"results":[{"docs":[{"error":"not_found","reason":"missing"}],"id":"x"}]}`
	_, errs, err := ParseBulkGet(strings.NewReader(body), []replicate.RevRequest{{ID: "y", Rev: "1-y"}, {ID: "x", Rev: "1-x"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []replicate.DocError{{ID: "x", Rev: "1-x", Error: "not_found", Reason: "missing"}}; !cmp.Equal(want, errs) {
		t.Errorf("errs = %+v", errs)
	}
}

func TestParseBulkGet_BadDocIsDocError(t *testing.T) {
	body := `{"results":[{"id":"x","docs":[{"ok":{"_rev":"1-a","v":1}}]}]}`
	docs, errs, err := ParseBulkGet(strings.NewReader(body), []replicate.RevRequest{{ID: "x", Rev: "1-a"}})
	if err != nil || len(docs) != 0 || len(errs) != 1 || errs[0].Error != "bad_doc" || errs[0].ID != "x" || errs[0].Rev != "1-a" {
		t.Errorf("docs %v errs %+v err %v", docs, errs, err)
	}
}

func TestParseBulkGet_ErrorBody(t *testing.T) {
	_, _, err := ParseBulkGet(strings.NewReader(`{"error":"bad_request","reason":"Missing JSON list of 'docs'."}`), nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "bad_request" {
		t.Errorf("err = %v, want *Error bad_request", err)
	}
}

func TestParseBulkGet_Truncated(t *testing.T) {
	body := readTestdata(t, "bulkget_couch.json")
	for i := 0; i < len(body)-2; i++ {
		_, _, err := ParseBulkGet(bytes.NewReader(body[:i]), nil)
		if err == nil {
			t.Fatalf("cut at %d: no error", i)
		}
	}
}
