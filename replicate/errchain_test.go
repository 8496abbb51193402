package replicate_test

import (
	"errors"
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// The server's answer is seen through both layers: a run whose target
// refuses _bulk_docs (403) returns an error from which couch.StatusOf and
// errors.As find the *couch.Error with the server's status and reason
// (package couch wrapped it with %v, which cut the chain: StatusOf said 0).
func TestRunServerErrorChain(t *testing.T) {
	e := newFaultEnv(t, couch.Options{})
	mustBulk(t, e.srv, e.src, true, raw(`{"_id":"a"}`), raw(`{"_id":"b"}`))
	e.rules(t, faultproxy.Rule{Name: "refuse", Method: "POST", Path: path(e.tgt, `/_bulk_docs$`), Fault: faultproxy.Status, Status: 403,
		Body: `{"error":"forbidden","reason":"no writes here"}`})
	_, err := replicate.Run(t.Context(), e.sdb, e.tdb, replicate.Options{})
	if err == nil {
		t.Fatal("run ended without error though the target refused every write")
	}
	t.Logf("error: %v", err)
	if st := couch.StatusOf(err); st != 403 {
		t.Errorf("couch.StatusOf(err) = %d, want 403 (the chain is cut)", st)
	}
	var ce *couch.Error
	if !errors.As(err, &ce) || ce.Reason != "no writes here" {
		t.Errorf("errors.As(err, *couch.Error) = %v, %+v; want the server's reason", ce != nil, ce)
	}
}
