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

// A design document also waits for the batches cut after it but not yet
// taken by a worker, and waits off the worker: with one worker, waiting
// on it would leave the next batch without one for ever. The source's
// validate_doc_update lets the document after the design document in
// through its `_security` (which replicate.Run does not copy), as a
// document of another shard that CouchDB's merged feed gave late would
// have been let in by coming first; on the target it is refused unless
// it is written before the design document.
func TestDesignDocWaitsForBatchesCut(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "a validate_doc_update function judging replicated writes")
	e := newFaultEnv(t, faultOpts)
	c := e.srv.Client()
	// One shard: the feed gives the writes in their order.
	for _, m := range []string{"DELETE", "PUT"} {
		q := map[string]string{"DELETE": "", "PUT": "?q=1"}[m]
		if _, err := c.Do(t.Context(), m, "/"+couchtest.EscapeDB(e.src)+q, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// "a", in the design document's batch, is at its second generation
	// and the target is not empty: its batch asks the target's
	// _revs_diff, which the proxy holds.
	if _, err := c.PutDoc(t.Context(), e.tgt, "z", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	rev, err := c.PutDoc(t.Context(), e.src, "a", map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(t.Context(), e.src, "a", map[string]any{"n": 2, "_rev": rev}); err != nil {
		t.Fatal(err)
	}
	vdu := `function(n, o, u, sec) { if (n.reject && !sec.allow_reject) { throw({forbidden: 'rejected'}); } }`
	if _, err := c.PutDoc(t.Context(), e.src, "_design/v", map[string]any{"validate_doc_update": vdu}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(t.Context(), "PUT", "/"+couchtest.EscapeDB(e.src)+"/_security", []byte(`{"allow_reject":true}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(t.Context(), e.src, "late", map[string]any{"reject": true}); err != nil {
		t.Fatal(err)
	}
	// The design document's batch is slow to write its other revision,
	// so the next batch is cut (the feed is one answer) before it is.
	e.rules(t, faultproxy.Rule{Name: "diff", Method: "POST", Path: path(e.tgt, "/_revs_diff$"), Fault: faultproxy.Forward, Delay: 300 * time.Millisecond, Times: 1})
	res, err := replicate.Run(t.Context(), e.sdb, e.tdb, replicate.Options{BatchSize: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if st := e.px.Rule("diff"); st.Fired != 1 {
		t.Errorf("the proxy held %d _revs_diff, want 1", st.Fired)
	}
	if res.Stats.DocWriteFailures != 0 || res.Stats.DocsWritten != 3 {
		t.Errorf("docs_written %d, doc_write_failures %d (%v); want 3 and 0", res.Stats.DocsWritten, res.Stats.DocWriteFailures, res.Failures)
	}
}
