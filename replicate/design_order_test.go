package replicate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// A design document whose validate_doc_update refuses the documents
// written before it on the source is written only after them: here the
// first three writes of the four earlier batches are held a second by
// the proxy, so the worker whose write went through takes the design
// document's batch while the three are still on their way. Written at
// once, the function would refuse them on the target (doc_write_failures
// "forbidden"), where the source never judged them.
func TestDesignDocWaitsForEarlierBatches(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "a validate_doc_update function judging replicated writes")
	e := newFaultEnv(t, faultOpts)
	c := e.srv.Client()
	for i := range 40 {
		if _, err := c.PutDoc(t.Context(), e.src, fmt.Sprintf("r%02d", i), map[string]any{"reject": true}); err != nil {
			t.Fatal(err)
		}
	}
	vdu := `function(n, o, u) { if (n.reject) { throw({forbidden: 'rejected'}); } }`
	if _, err := c.PutDoc(t.Context(), e.src, "_design/v", map[string]any{"validate_doc_update": vdu}); err != nil {
		t.Fatal(err)
	}
	e.rules(t, faultproxy.Rule{Name: "slow", Method: "POST", Path: path(e.tgt, "/_bulk_docs$"), Fault: faultproxy.Forward, Delay: time.Second, Times: 1})
	res, err := replicate.Run(t.Context(), e.sdb, e.tdb, replicate.Options{BatchSize: 10, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.px.Rule("slow"); st.Fired != 1 {
		t.Errorf("the proxy held %d writes, want 1", st.Fired)
	}
	if res.Stats.DocWriteFailures != 0 || res.Stats.DocsWritten != 41 {
		t.Errorf("docs_written %d, doc_write_failures %d (%v); want 41 and 0", res.Stats.DocsWritten, res.Stats.DocWriteFailures, res.Failures)
	}
}
