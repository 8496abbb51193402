package sofa_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// A document deleted on the target keeps as many documents there as at
// the source, one fewer live: the default (cheap) check took it for
// equal and said ok (found by a tester); it now compares every document
// and warns of it.
func TestCopy_CheapCheckSeesTargetDeletion(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "doc_del_count: PouchDB Server reports none")
	ctx := t.Context()
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	seed(t, src, "x", 3)
	s, d := openAt(t, src.URL, nil), openAt(t, tgt.URL, nil)
	o := sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"x"}}}
	if sum, err := sofa.Copy(ctx, s, d, o); err != nil || !sum.Complete() {
		t.Fatalf("copy: %+v, %v", sum, err)
	}
	c := tgt.Client()
	var doc struct {
		Rev string `json:"_rev"`
	}
	if err := c.GetJSON(ctx, "/x/doc001", &doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "DELETE", "/x/doc001?rev="+doc.Rev, nil, nil); err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Copy(ctx, s, d, o)
	if err != nil || !sum.Complete() || len(sum.DBs) != 1 {
		t.Fatalf("second copy: %+v, %v", sum, err)
	}
	if !slices.ContainsFunc(sum.DBs[0].Warnings, func(w string) bool {
		return strings.Contains(w, "1 document is deleted on one side and live on the other") && strings.Contains(w, `"doc001"`)
	}) {
		t.Errorf("no warning of doc001, deleted on the target: %q", sum.DBs[0].Warnings)
	}
}
