package replicate_test

import (
	"slices"
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// A target that refuses a whole _revs_diff for one of its documents (400
// with a named error, as CouchDB's illegal_docid on a partitioned
// database) has the request split until each refused document is alone:
// each is listed with the server's words and the run goes on. A 400
// bad_request (the request's form) still fails the run, unsplit. The
// refusals come from the fault proxy, so the engine's rule is checked on
// both servers.
func TestRunRevsDiffDocRefusal(t *testing.T) {
	t.Run("illegal_docid", func(t *testing.T) {
		e := newFaultEnv(t, faultOpts)
		mustBulk(t, e.srv, e.tgt, true, raw(`{"_id":"there"}`)) // not empty: _revs_diff is asked
		var ids []string
		for i := range 6 {
			id := string(rune('a'+i)) + "doc"
			ids = append(ids, id)
			mustBulk(t, e.srv, e.src, false, raw(`{"_id":%q,"_rev":"1-a1"}`, id))
		}
		e.rules(t, faultproxy.Rule{Name: "refuse", Method: "POST", Path: path(e.tgt, `/_revs_diff$`), Fault: faultproxy.Status, Status: 400,
			Body: `{"error":"illegal_docid","reason":"Doc id must be of form partition:id"}`})
		res, err := replicate.Run(t.Context(), e.sdb, e.tdb, replicate.Options{})
		if err != nil {
			t.Fatalf("run failed: %v", err)
		}
		var got []string
		for _, f := range res.Failures {
			got = append(got, f.ID)
			if f.Rev != "1-a1" || f.Error != "illegal_docid" || f.Reason != "Doc id must be of form partition:id" {
				t.Errorf("failure %+v, want rev 1-a1 with the server's error and reason", f)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, ids) || res.Stats.DocWriteFailures != int64(len(ids)) || res.Stats.DocsWritten != 0 {
			t.Errorf("failures %q (%d), %d written; want %q, none written", got, res.Stats.DocWriteFailures, res.Stats.DocsWritten, ids)
		}
		// Every half is refused down to single ids: 2n-1 requests.
		if n := e.px.Rule("refuse").Fired; n != int64(2*len(ids)-1) {
			t.Errorf("_revs_diff asked %d times, want %d", n, 2*len(ids)-1)
		}
	})
	t.Run("bad_request", func(t *testing.T) {
		e := newFaultEnv(t, faultOpts)
		mustBulk(t, e.srv, e.tgt, true, raw(`{"_id":"there"}`))
		mustBulk(t, e.srv, e.src, true, raw(`{"_id":"a"}`), raw(`{"_id":"b"}`))
		e.rules(t, faultproxy.Rule{Name: "refuse", Method: "POST", Path: path(e.tgt, `/_revs_diff$`), Fault: faultproxy.Status, Status: 400,
			Body: `{"error":"bad_request","reason":"invalid UTF-8 JSON"}`})
		res, err := replicate.Run(t.Context(), e.sdb, e.tdb, replicate.Options{})
		if err == nil || couch.StatusOf(err) != 400 {
			t.Fatalf("run ended with %v, want the target's 400", err)
		}
		if len(res.Failures) != 0 {
			t.Errorf("failures %+v, want none (the request was refused, not a document)", res.Failures)
		}
		if n := e.px.Rule("refuse").Fired; n != 1 {
			t.Errorf("_revs_diff asked %d times, want once (not split)", n)
		}
	})
}
