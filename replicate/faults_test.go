package replicate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
	"github.com/sofadb/sofa/replicate"
)

// faultOpts are client options for runs through the fault proxy: short
// attempts and budgets so that a test that cannot succeed fails quickly.
var faultOpts = couch.Options{AttemptTimeout: 2 * time.Second, RetryTime: 30 * time.Second, Max429Wait: time.Minute}

// faultEnv is a source and a target database on the shared server, both
// reached through one fault proxy, each with its own client (so that its
// retry counters are its own).
type faultEnv struct {
	srv      *couchtest.Server
	px       *faultproxy.Proxy
	src, tgt string
	sdb, tdb *couch.DB
}

func newFaultEnv(t *testing.T, opts couch.Options) *faultEnv {
	t.Helper()
	srv := couchtest.Shared(t)
	e := &faultEnv{srv: srv, px: faultproxy.StartT(t, srv.URL), src: srv.NewDB(t), tgt: srv.NewDB(t)}
	e.sdb = proxiedDB(t, e.px, e.src, opts)
	e.tdb = proxiedDB(t, e.px, e.tgt, opts)
	return e
}

func proxiedDB(t *testing.T, px *faultproxy.Proxy, name string, opts couch.Options) *couch.DB {
	t.Helper()
	ep, err := couch.Probe(t.Context(), px.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ep.Server.DB(name)
}

// path is the regexp of a database's escaped path followed by rest.
func path(db, rest string) string { return "^/" + regexp.QuoteMeta(couchtest.EscapeDB(db)) + rest }

// rules sets the proxy's rules or fails the test.
func (e *faultEnv) rules(t *testing.T, rules ...faultproxy.Rule) {
	t.Helper()
	if err := e.px.SetRules(rules...); err != nil {
		t.Fatal(err)
	}
}

// loadDocs writes n documents "d00000".. with a body of about size bytes.
// loadDocs2 writes n documents of about size bytes as generation-2
// revisions: unlike generation-1 ones, an initial copy cannot take them
// from the changes feed (include_docs), so they are read with _bulk_get.
func loadDocs2(t *testing.T, srv *couchtest.Server, db string, n, size int) {
	t.Helper()
	pad := strings.Repeat("x", size)
	for start := 0; start < n; start += 500 {
		var docs []json.RawMessage
		for i := start; i < min(n, start+500); i++ {
			docs = append(docs, raw(`{"_id":"d%05d","_rev":"2-b%05d","_revisions":{"start":2,"ids":["b%05d","a%05d"]},"i":%d,"pad":%q}`, i, i, i, i, i, pad))
		}
		mustBulk(t, srv, db, false, docs...)
	}
}

func loadDocs(t *testing.T, srv *couchtest.Server, db string, n, size int) {
	t.Helper()
	pad := strings.Repeat("x", size)
	for start := 0; start < n; start += 500 {
		var docs []json.RawMessage
		for i := start; i < min(n, start+500); i++ {
			docs = append(docs, raw(`{"_id":"d%05d","i":%d,"pad":%q}`, i, i, pad))
		}
		mustBulk(t, srv, db, true, docs...)
	}
}

// run replicates through the proxy and fails the test on error.
func (e *faultEnv) run(t *testing.T, opts replicate.Options) *replicate.Result {
	t.Helper()
	res, err := replicate.Run(context.Background(), e.sdb, e.tdb, opts)
	if err != nil {
		t.Fatalf("replicate: %v (stats %+v)", err, res.Stats)
	}
	t.Logf("stats %+v; source client: %s; target client: %s", res.Stats, clientStats(e.sdb), clientStats(e.tdb))
	return res
}

func clientStats(d *couch.DB) string {
	s := d.Server().Stats
	return fmt.Sprintf("requests=%d retries=%d throttled=%d waited=%s", s.Requests.Load(), s.Retries.Load(),
		s.Throttled.Load(), time.Duration(s.WaitNanos.Load()).Round(time.Millisecond))
}

func retries(e *faultEnv) int64 {
	return e.sdb.Server().Stats.Retries.Load() + e.tdb.Server().Stats.Retries.Load()
}

func throttled(e *faultEnv) int64 {
	return e.sdb.Server().Stats.Throttled.Load() + e.tdb.Server().Stats.Throttled.Load()
}

// assertNoExtraLeaves checks that no document of the target has a
// conflict the source lacks: retried new_edits=false writes must never
// add revisions.
func assertNoExtraLeaves(t *testing.T, srv *couchtest.Server, src, tgt string) {
	t.Helper()
	count := func(db string) (docs int, leaves int) {
		var out struct {
			Rows []struct {
				Doc struct {
					Conflicts []string `json:"_conflicts"`
				} `json:"doc"`
			} `json:"rows"`
		}
		if err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(db)+"/_all_docs?include_docs=true&conflicts=true", &out); err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Rows {
			leaves += 1 + len(r.Doc.Conflicts)
		}
		return len(out.Rows), leaves
	}
	sd, sl := count(src)
	td, tl := count(tgt)
	if sd != td || sl != tl {
		t.Errorf("target has %d docs with %d live leaves, source %d with %d", td, tl, sd, sl)
	}
}

// C2: the first _changes answer is a 500; the run retries and completes.
func TestFaults_ChangesFirst500(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs(t, e.srv, e.src, 300, 100)
	e.rules(t, faultproxy.Rule{Name: "500", Method: "GET", Path: path(e.src, "/_changes$"), Fault: faultproxy.Status, Status: 500, Times: 1})
	res := e.run(t, replicate.Options{BatchSize: 50})
	if got := e.px.Rule("500").Fired; got != 1 {
		t.Fatalf("rule fired %d times, want 1", got)
	}
	if res.Stats.DocsWritten != 300 || retries(e) < 1 {
		t.Errorf("docs_written=%d retries=%d, want 300 and at least 1", res.Stats.DocsWritten, retries(e))
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// C2: the changes feed is cut three times without last_seq; the reader
// resumes from the last row it processed (no row is read twice).
// With closeJSON the cut answer is well-formed JSON without last_seq,
// ended cleanly: still a cut, not the feed's end.
func TestFaults_ChangesCut(t *testing.T) {
	for _, closeJSON := range []bool{false, true} {
		t.Run(fmt.Sprintf("closeJSON=%v", closeJSON), func(t *testing.T) {
			e := newFaultEnv(t, faultOpts)
			const n = 2000 // at full size 20,000 cut after 5,000 (scaled down)
			loadDocs(t, e.srv, e.src, n, 50)
			e.rules(t, faultproxy.Rule{Name: "cut", Method: "GET", Path: path(e.src, "/_changes$"), Fault: faultproxy.CutChanges, CutRows: 500, Times: 3, CloseJSON: closeJSON})
			res := e.run(t, replicate.Options{BatchSize: 100})
			if got := e.px.Rule("cut").Fired; got != 3 {
				t.Fatalf("cut fired %d times, want 3", got)
			}
			if res.Stats.ChangesRead != n || res.Stats.DocsWritten != n {
				t.Errorf("changes_read=%d docs_written=%d, want %d each (resume from the last row)", res.Stats.ChangesRead, res.Stats.DocsWritten, n)
			}
			couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
		})
	}
}

// C2: a feed that always breaks before its first row makes the run fail
// (non-zero), within the retry budget, without a checkpoint.
func TestFaults_ChangesAlwaysCutFails(t *testing.T) {
	opts := faultOpts
	opts.RetryTime = 3 * time.Second
	e := newFaultEnv(t, opts)
	loadDocs(t, e.srv, e.src, 50, 10)
	e.rules(t, faultproxy.Rule{Method: "GET", Path: path(e.src, "/_changes$"), Fault: faultproxy.CutChanges, CutBytes: 5})
	t0 := time.Now()
	res, err := replicate.Run(context.Background(), e.sdb, e.tdb, replicate.Options{})
	if err == nil {
		t.Fatalf("run succeeded on a feed that always breaks: %+v", res.Stats)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("gave up after %s, want within the 3 s retry budget plus one backoff", d)
	}
	if !strings.Contains(err.Error(), "_changes") && !strings.Contains(err.Error(), "changes") {
		t.Errorf("error %q does not say what broke", err)
	}
	if res.Stats.DocsWritten != 0 || len(res.EndSeq) != 0 {
		t.Errorf("wrote %d docs, end seq %s", res.Stats.DocsWritten, res.EndSeq)
	}
}

// Issue item 1: a _bulk_docs answer lost after the write happened (reset
// after forwarding) and a reset before any answer on one request in 50:
// retried writes are idempotent, no duplicate or extra revision appears.
func TestFaults_ResetsIdempotentWrites(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs2(t, e.srv, e.src, 1500, 200)
	// A few conflicts, so that "no extra leaf" means something.
	mustBulk(t, e.srv, e.src, false,
		raw(`{"_id":"d00001","_rev":"1-aaaa","v":"conflict"}`),
		raw(`{"_id":"d00002","_rev":"2-bbbb","_revisions":{"start":2,"ids":["bbbb","cccc"]}}`))
	e.rules(t,
		faultproxy.Rule{Name: "lost-answer", Method: "POST", Path: path(e.tgt, "/_bulk_docs$"), Fault: faultproxy.ResetAfterForward, Probability: 0.2, Times: 12},
		faultproxy.Rule{Name: "mid-body", Method: "POST", Path: "/_bulk_get$", Fault: faultproxy.ResetMidBody, CutBytes: 300, Probability: 0.3, Times: 3},
		faultproxy.Rule{Name: "reset", Fault: faultproxy.Reset, Probability: 0.02},
	)
	res := e.run(t, replicate.Options{BatchSize: 100, WriteBatchDocs: 50})
	st := e.px.Stats()
	t.Logf("proxy rules %+v", st.Rules)
	if st.Rules["lost-answer"].Fired == 0 || st.Rules["reset"].Fired == 0 || st.Rules["mid-body"].Fired == 0 {
		t.Fatalf("faults did not fire: %+v", st.Rules)
	}
	if res.Stats.DocWriteFailures != 0 || retries(e) < st.Rules["lost-answer"].Fired {
		t.Errorf("failures=%d retries=%d (lost answers %d)", res.Stats.DocWriteFailures, retries(e), st.Rules["lost-answer"].Fired)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
	assertNoExtraLeaves(t, e.srv, e.src, e.tgt)
}

// C4: one connection in 200 reset and 1% of answers delayed beyond the
// attempt timeout (60 s at full size; 3 s against a 1 s timeout here).
func TestFaults_ResetsAndSlowAnswers(t *testing.T) {
	opts := faultOpts
	opts.AttemptTimeout = time.Second
	e := newFaultEnv(t, opts)
	loadDocs(t, e.srv, e.src, 1000, 100)
	e.rules(t,
		faultproxy.Rule{Name: "slow", Fault: faultproxy.Forward, Delay: 3 * time.Second, Probability: 0.01},
		faultproxy.Rule{Name: "slow-first-write", Method: "POST", Path: "/_bulk_docs$", Fault: faultproxy.Forward, Delay: 3 * time.Second, Times: 1},
		faultproxy.Rule{Name: "reset", Fault: faultproxy.Reset, Probability: 0.005},
	)
	res := e.run(t, replicate.Options{BatchSize: 50, WriteBatchDocs: 25})
	if e.px.Rule("slow-first-write").Fired != 1 || retries(e) < 1 {
		t.Errorf("slow answer not retried: rules %+v, retries %d", e.px.Stats().Rules, retries(e))
	}
	if res.Stats.DocsWritten != 1000 {
		t.Errorf("docs_written=%d, want 1000", res.Stats.DocsWritten)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
	assertNoExtraLeaves(t, e.srv, e.src, e.tgt)
}

// Issue item 6: 500 on 10% of _bulk_docs and _bulk_get.
func TestFaults_500OnBulkRequests(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs2(t, e.srv, e.src, 2000, 100)
	e.rules(t,
		faultproxy.Rule{Name: "500-get", Method: "POST", Path: "/_bulk_get$", Fault: faultproxy.Status, Status: 500, Probability: 0.1},
		faultproxy.Rule{Name: "500", Method: "POST", Path: "/_bulk_docs$", Fault: faultproxy.Status, Status: 500, Probability: 0.1})
	// Workers=1 keeps _revs_diff skipping off the table: every batch
	// reads with _bulk_get.
	res := e.run(t, replicate.Options{BatchSize: 100, FetchBatch: 25, WriteBatchDocs: 50})
	fired := e.px.Rule("500").Fired + e.px.Rule("500-get").Fired
	if e.px.Rule("500").Fired == 0 || e.px.Rule("500-get").Fired == 0 || retries(e) < fired {
		t.Errorf("500 fired %d times on _bulk_docs, %d on _bulk_get, retries %d", e.px.Rule("500").Fired, e.px.Rule("500-get").Fired, retries(e))
	}
	if res.Stats.DocsWritten != 2000 || res.Stats.DocWriteFailures != 0 {
		t.Errorf("stats %+v", res.Stats)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
	assertNoExtraLeaves(t, e.srv, e.src, e.tgt)
}

// Issue item 6: 429 (Retry-After: 1) on 30% of all requests for 10 s.
// 429 waits are counted apart from retries and do not exhaust the retry
// budget (which is set shorter than the time spent throttled).
func TestFaults_Throttle30Percent(t *testing.T) {
	opts := faultOpts
	opts.RetryTime = 2 * time.Second
	e := newFaultEnv(t, opts)
	loadDocs(t, e.srv, e.src, 1500, 100)
	e.rules(t, faultproxy.Rule{Name: "429", Fault: faultproxy.Status, Status: 429, RetryAfter: "1", Probability: 0.3})
	stop := time.AfterFunc(10*time.Second, func() { e.px.SetRules() })
	defer stop.Stop()
	res := e.run(t, replicate.Options{BatchSize: 100, WriteBatchDocs: 50, CheckpointInterval: 500 * time.Millisecond})
	fired := e.px.Rule("429").Fired
	if fired == 0 || throttled(e) != fired {
		t.Errorf("429 answered %d times, client counted %d throttled", fired, throttled(e))
	}
	waited := time.Duration(e.sdb.Server().Stats.WaitNanos.Load() + e.tdb.Server().Stats.WaitNanos.Load())
	if waited < time.Duration(fired)*time.Second {
		t.Errorf("waited %s in total for %d answers with Retry-After: 1", waited, fired)
	}
	if res.Stats.DocsWritten != 1500 {
		t.Errorf("docs_written=%d", res.Stats.DocsWritten)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// Issue item 6: 100 ms added to every request.
func TestFaults_Latency100ms(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs(t, e.srv, e.src, 1000, 100)
	e.rules(t, faultproxy.Rule{Name: "slow", Fault: faultproxy.Forward, Delay: 100 * time.Millisecond})
	res := e.run(t, replicate.Options{BatchSize: 100})
	if res.Stats.DocsWritten != 1000 || retries(e) != 0 {
		t.Errorf("docs_written=%d retries=%d, want 1000 and none", res.Stats.DocsWritten, retries(e))
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// A4: one document with 50 attachments of 300 KB behind a proxy that
// answers 429 above 20 requests/s: absorbed by back-off, not failure.
func TestFaults_A4_RateLimitedAttachments(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	atts := map[string]any{}
	for i := 0; i < 50; i++ {
		atts[fmt.Sprintf("a%02d.bin", i)] = map[string]any{"content_type": "application/octet-stream", "data": b64(randomBytes(300 << 10))}
	}
	body, _ := json.Marshal(map[string]any{"_id": "many", "_attachments": atts})
	mustBulk(t, e.srv, e.src, true, body)
	loadDocs(t, e.srv, e.src, 20, 10)
	e.px.SetLimits(faultproxy.Limits{RatePerSec: 20})
	// a machine slowed enough (the race detector on a loaded CI) never
	// sends 20 requests/s: a few attachment reads are refused whatever
	// the rate, so that back-off is always tested
	e.rules(t, faultproxy.Rule{Name: "429", Method: "GET", Path: path(e.src, `/many/a\d\d\.bin$`), After: 5, Times: 3, Fault: faultproxy.Status, Status: 429, RetryAfter: "0"})
	res := e.run(t, replicate.Options{})
	if refused := e.px.Stats().Throttled + e.px.Rule("429").Fired; refused == 0 || throttled(e) < refused {
		t.Errorf("429 answers: rate limit %d, rule %d; seen by the clients %d: the test does not test A4", e.px.Stats().Throttled, e.px.Rule("429").Fired, throttled(e))
	}
	if res.Stats.AttachmentsRead != 50 || res.Stats.DocWriteFailures != 0 {
		t.Errorf("stats %+v", res.Stats)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// M3: 600 docs of 3 KB plus one of 1.2 MB, target limit 1 MB per request:
// batches split until they fit; the oversized doc is reported by id, rev
// and reason; the rest is written. A second run without the limit copies
// it (the checkpoint stayed before it).
func TestFaults_M3_SplitOnTooLarge(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs(t, e.srv, e.src, 600, 3000)
	rev, err := e.srv.Client().PutDoc(t.Context(), e.src, "huge", map[string]any{"pad": strings.Repeat("h", 1_200_000)})
	if err != nil {
		t.Fatal(err)
	}
	e.px.SetLimits(faultproxy.Limits{MaxBodyBytes: 1 << 20})
	res := e.run(t, replicate.Options{})
	if len(res.Failures) != 1 || res.Failures[0].ID != "huge" || res.Failures[0].Rev != rev || !strings.Contains(res.Failures[0].Reason, "413") {
		t.Fatalf("failures %+v, want only huge %s with a 413 reason", res.Failures, rev)
	}
	if res.Stats.DocsWritten != 600 || res.Stats.DocWriteFailures != 1 {
		t.Errorf("stats %+v, want 600 written and 1 failure", res.Stats)
	}
	if e.px.Stats().TooLarge < 2 {
		t.Errorf("proxy refused %d requests: batches were not split", e.px.Stats().TooLarge)
	}
	e.px.SetLimits(faultproxy.Limits{})
	res = e.run(t, replicate.Options{})
	if res.Stats.DocsWritten != 1 || len(res.Failures) != 0 {
		t.Errorf("second run %+v %v, want huge written", res.Stats, res.Failures)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// A3: target refuses bodies over N bytes. The doc with one attachment of
// 2N is reported by id, rev and reason; the others are written.
//
// The doc with two attachments of 0.6N each cannot be written under this
// limit by any replicator: a revision is written whole with
// new_edits=false (one request holding 1.2N bytes as multipart, 1.6N as
// base64 JSON), and CouchDB has no way to add an attachment to an existing
// revision without making a new one. It is reported too, never lost.
func TestFaults_A3_AttachmentTooLarge(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	const n = 200 << 10
	put := func(id string, sizes ...int) {
		atts := map[string]any{}
		for i, s := range sizes {
			atts[fmt.Sprintf("a%d.bin", i)] = map[string]any{"content_type": "application/octet-stream", "data": b64(randomBytes(s))}
		}
		body, _ := json.Marshal(map[string]any{"_id": id, "_attachments": atts})
		mustBulk(t, e.srv, e.src, true, body)
	}
	put("big", 2*n)
	put("two", 6*n/10, 6*n/10)
	put("small", n/10, n/10)
	loadDocs(t, e.srv, e.src, 30, 100)
	e.px.SetLimits(faultproxy.Limits{MaxBodyBytes: n})
	res := e.run(t, replicate.Options{})
	failed := map[string]replicate.DocError{}
	for _, f := range res.Failures {
		failed[f.ID] = f
	}
	if f, ok := failed["big"]; !ok || f.Rev == "" || !strings.Contains(f.Reason, "413") {
		t.Errorf("big not reported with rev and 413 reason: %+v", res.Failures)
	}
	if _, ok := failed["two"]; !ok {
		t.Errorf("two neither written nor reported: %+v", res.Failures)
	}
	if len(failed) != 2 || res.Stats.DocsWritten != 31 {
		t.Errorf("failures %+v, stats %+v: want big and two reported, 31 written", res.Failures, res.Stats)
	}
	ids := allIDs(t, e.srv, e.tgt)
	if !ids["small"] || !ids["d00029"] || ids["big"] {
		t.Errorf("target ids %v", ids)
	}
}

// Issue item 4: per-document rejections (forbidden) are counted in
// doc_write_failures, listed, and the run continues; the checkpoint does
// not pass them, so a run after the cause is gone copies them.
func TestFaults_RejectedDocs(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs(t, e.srv, e.src, 400, 50)
	e.rules(t, faultproxy.Rule{Name: "reject", Fault: faultproxy.RejectDocs, DocIDs: []string{"d00003", "d00250"}, Reason: "not allowed here"})
	res := e.run(t, replicate.Options{BatchSize: 100})
	if res.Stats.DocWriteFailures != 2 || len(res.Failures) != 2 || res.Stats.DocsWritten != 398 {
		t.Fatalf("stats %+v failures %+v", res.Stats, res.Failures)
	}
	for _, f := range res.Failures {
		if (f.ID != "d00003" && f.ID != "d00250") || f.Rev == "" || f.Error != "forbidden" || f.Reason != "not allowed here" {
			t.Errorf("failure %+v", f)
		}
	}
	e.rules(t)
	res = e.run(t, replicate.Options{BatchSize: 100})
	if res.Stats.DocsWritten != 2 || len(res.Failures) != 0 {
		t.Errorf("second run %+v %v, want the two rejected docs written", res.Stats, res.Failures)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// Issue item 3: a 412 missing_stub answer makes the writer fetch the
// attachment bytes and write the revision again.
func TestFaults_MissingStub(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	c := e.srv.Client()
	if _, err := c.PutAttachment(t.Context(), e.src, "doc", "", "a.txt", "text/plain", []byte("attachment bytes")); err != nil {
		t.Fatal(err)
	}
	e.run(t, replicate.Options{})
	var doc map[string]any
	if err := c.GetJSON(t.Context(), "/"+e.src+"/doc", &doc); err != nil {
		t.Fatal(err)
	}
	doc["v"] = 2
	rev, err := c.PutDoc(t.Context(), e.src, "doc", doc)
	if err != nil {
		t.Fatal(err)
	}
	e.rules(t, faultproxy.Rule{Name: "412", Method: "POST", Path: path(e.tgt, "/_bulk_docs$"), Fault: faultproxy.Status, Status: 201, Times: 1,
		Body: fmt.Sprintf(`[{"id":"doc","rev":%q,"error":"missing_stub","reason":"Invalid attachment stub in doc for a.txt"}]`, rev)})
	res := e.run(t, replicate.Options{})
	if e.px.Rule("412").Fired != 1 {
		t.Fatal("missing_stub answer not sent")
	}
	if res.Stats.DocsWritten != 1 || len(res.Failures) != 0 {
		t.Errorf("stats %+v failures %v", res.Stats, res.Failures)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// Issue item 3: 414 on an open_revs GET: the request is shortened (fewer
// revisions per GET) instead of reporting the revisions.
func TestFaults_URITooLong(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	var leaves []json.RawMessage
	for i := 0; i < 6; i++ {
		leaves = append(leaves, raw(`{"_id":"conflicted","_rev":"1-%032d","leaf":%d}`, i, i))
	}
	mustBulk(t, e.srv, e.src, false, leaves...)
	e.rules(t,
		faultproxy.Rule{Name: "no-bulk-get", Method: "POST", Path: "/_bulk_get$", Fault: faultproxy.Status, Status: 404},
		faultproxy.Rule{Name: "414", Method: "GET", Path: path(e.src, "/conflicted$"), Fault: faultproxy.Status, Status: 414, Times: 2},
	)
	res := e.run(t, replicate.Options{})
	if e.px.Rule("414").Fired != 2 {
		t.Fatalf("414 fired %d times", e.px.Rule("414").Fired)
	}
	if res.Stats.DocsWritten != 6 || len(res.Failures) != 0 {
		t.Errorf("stats %+v failures %v", res.Stats, res.Failures)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

// C5: the source refuses _local writes (read-only credentials): the run
// succeeds with target-only checkpoints, says so once, and the next run
// resumes from the target's checkpoint.
func TestFaults_C5_ReadOnlySourceCheckpoints(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	loadDocs(t, e.srv, e.src, 300, 50)
	e.rules(t, faultproxy.Rule{Name: "ro", Method: "PUT", Path: path(e.src, "/_local/"), Fault: faultproxy.Status, Status: 403})
	res := e.run(t, replicate.Options{BatchSize: 50, CheckpointInterval: 50 * time.Millisecond})
	if !res.TargetOnlyCheckpoints {
		t.Error("TargetOnlyCheckpoints not set")
	}
	n := 0
	for _, w := range res.Warnings {
		if strings.Contains(w, "target only") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("warnings %q: want the target-only notice exactly once", res.Warnings)
	}
	if e.px.Rule("ro").Fired != 1 {
		t.Errorf("source _local written %d times after its refusal", e.px.Rule("ro").Fired-1)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
	loadMore(t, e.srv, e.src, 5)
	res = e.run(t, replicate.Options{})
	if len(res.StartSeq) == 0 || res.Stats.ChangesRead != 5 {
		t.Errorf("second run started at %s and read %d changes, want the checkpoint and 5", res.StartSeq, res.Stats.ChangesRead)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)
}

func loadMore(t *testing.T, srv *couchtest.Server, db string, n int) {
	t.Helper()
	var docs []json.RawMessage
	for i := 0; i < n; i++ {
		docs = append(docs, raw(`{"_id":"more-%d-%d"}`, time.Now().UnixNano(), i))
	}
	mustBulk(t, srv, db, true, docs...)
}

// Issue item 7: a source deleted and recreated between two runs. PouchDB
// Server keeps instance_start_time across the recreation, so the
// checkpoint must be distrusted for another reason: the source's copy of
// it is gone (and its update_seq may be behind the checkpoint).
func TestFaults_RecreatedSource(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after int // docs in the recreated source
	}{{"fewer", 5}, {"more", 40}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFaultEnv(t, faultOpts)
			loadDocs(t, e.srv, e.src, 20, 10)
			e.run(t, replicate.Options{})
			c := e.srv.Client()
			if err := c.DeleteDB(t.Context(), e.src); err != nil {
				t.Fatal(err)
			}
			if err := c.CreateDB(t.Context(), e.src); err != nil {
				t.Fatal(err)
			}
			var docs []json.RawMessage
			for i := 0; i < tc.after; i++ {
				docs = append(docs, raw(`{"_id":"new%03d"}`, i))
			}
			mustBulk(t, e.srv, e.src, true, docs...)
			res := e.run(t, replicate.Options{})
			if len(res.StartSeq) != 0 || res.Stats.DocsWritten != int64(tc.after) {
				t.Errorf("second run started at %s and wrote %d, want from the beginning and %d", res.StartSeq, res.Stats.DocsWritten, tc.after)
			}
			ids := allIDs(t, e.srv, e.tgt)
			if len(ids) != 20+tc.after {
				t.Errorf("target holds %d docs, want %d", len(ids), 20+tc.after)
			}
		})
	}
}

// R3: metadata copy tolerates PouchDB Server's missing _revs_limit (404),
// with a document updated many times.
func TestFaults_R3_RevsLimitMissing(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	c := e.srv.Client()
	rev := ""
	for i := 0; i < 150; i++ { // 1,500 at full size (scaled down)
		doc := map[string]any{"n": i}
		if rev != "" {
			doc["_rev"] = rev
		}
		var err error
		if rev, err = c.PutDoc(t.Context(), e.src, "busy", doc); err != nil {
			t.Fatal(err)
		}
	}
	// Non-default metadata, so that the comparison below compares
	// something: _security everywhere, _revs_limit where the server has
	// the route (CouchDB).
	if err := c.PutSecurity(t.Context(), e.src, couchtest.Security{Members: couchtest.Group{Names: []string{"r3"}, Roles: []string{"readers"}}}); err != nil {
		t.Fatal(err)
	}
	if e.srv.Kind == couchtest.CouchDB {
		if err := c.PutJSON(t.Context(), "/"+e.src+"/_revs_limit", 42, nil); err != nil {
			t.Fatal(err)
		}
	}
	res := e.run(t, replicate.Options{CopyMetadata: true})
	if res.Stats.DocsWritten != 1 {
		t.Errorf("stats %+v", res.Stats)
	}
	if e.srv.Kind == couchtest.CouchDB {
		var n int
		if err := c.GetJSON(t.Context(), "/"+e.tgt+"/_revs_limit", &n); err != nil || n != 42 {
			t.Errorf("target _revs_limit = %d (%v), want 42", n, err)
		}
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), couchtest.CompareOptions{PouchDBRevpos: true, RevsLimit: true, Security: true})
}

// E1: database names that need encoding; every request hits the right
// database (no stray database appears) and names are encoded once.
func TestFaults_E1_DatabaseNames(t *testing.T) {
	srv := couchtest.Shared(t)
	px := faultproxy.StartT(t, srv.URL)
	c := srv.Client()
	for _, name := range []string{"a$b", "a(b)", "a-b_c"} {
		tgtName := "copy-" + name
		for _, db := range []string{name, tgtName} {
			_ = c.DeleteDB(t.Context(), db)
			if err := c.CreateDB(t.Context(), db); err != nil {
				t.Fatal(err)
			}
		}
		var docs []json.RawMessage
		for i := 0; i < 3; i++ {
			docs = append(docs, raw(`{"_id":"%s-%d"}`, name, i))
		}
		mustBulk(t, srv, name, true, docs...)
		before := px.Stats().Requests
		res, err := replicate.Run(t.Context(), proxiedDB(t, px, name, faultOpts), proxiedDB(t, px, tgtName, faultOpts), replicate.Options{})
		if err != nil || res.Stats.DocsWritten != 3 {
			t.Fatalf("%s: %v %+v", name, err, res.Stats)
		}
		if px.Stats().Requests == before {
			t.Fatal("requests did not go through the proxy")
		}
		couchtest.AssertEqual(t, srv.DBURL(name), srv.DBURL(tgtName), pouch)
	}
	var all []string
	if err := c.GetJSON(t.Context(), "/_all_dbs", &all); err != nil {
		t.Fatal(err)
	}
	for _, db := range all {
		if strings.Contains(db, "%") {
			t.Errorf("stray database %q: a name was encoded twice", db)
		}
	}
}

// A `_bulk_get` answer that leaves documents out: asked again once, they
// are copied; left out again, they are reported not_returned, the run is
// incomplete and the checkpoint does not pass them (a rerun without the
// fault copies them).
func TestFaults_BulkGetLeavesDocsOut(t *testing.T) {
	e := newFaultEnv(t, faultOpts)
	const n = 300
	loadDocs2(t, e.srv, e.src, n, 50)
	e.rules(t, faultproxy.Rule{Name: "drop", Method: "POST", Path: path(e.src, "/_bulk_get$"), Fault: faultproxy.DropResults, CutRows: 3, Times: 1})
	res := e.run(t, replicate.Options{BatchSize: 100})
	if e.px.Rule("drop").Fired != 1 {
		t.Fatalf("drop fired %d times, want 1", e.px.Rule("drop").Fired)
	}
	if res.Stats.DocsWritten != n || len(res.Failures) != 0 {
		t.Errorf("docs_written=%d failures=%+v, want %d and none (asked again)", res.Stats.DocsWritten, res.Failures, n)
	}
	couchtest.AssertEqual(t, e.srv.DBURL(e.src), e.srv.DBURL(e.tgt), pouch)

	// Always left out: reported, and the next run copies them.
	e2 := newFaultEnv(t, faultOpts)
	loadDocs2(t, e2.srv, e2.src, n, 50)
	e2.rules(t, faultproxy.Rule{Name: "drop", Method: "POST", Path: path(e2.src, "/_bulk_get$"), Fault: faultproxy.DropResults, CutRows: 2})
	res, err := replicate.Run(context.Background(), e2.sdb, e2.tdb, replicate.Options{BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	notReturned := 0
	for _, f := range res.Failures {
		if f.Error == "not_returned" {
			notReturned++
		}
	}
	if notReturned == 0 || res.Stats.DocsWritten+int64(notReturned) != n {
		t.Fatalf("docs_written=%d, %d not_returned (failures %+v): want every document written or reported", res.Stats.DocsWritten, notReturned, res.Failures)
	}
	e2.rules(t)
	res = e2.run(t, replicate.Options{BatchSize: 100})
	if res.Stats.DocsWritten < int64(notReturned) || len(res.Failures) != 0 {
		t.Errorf("rerun: docs_written=%d failures=%+v, want the %d left out copied", res.Stats.DocsWritten, res.Failures, notReturned)
	}
	couchtest.AssertEqual(t, e2.srv.DBURL(e2.src), e2.srv.DBURL(e2.tgt), pouch)
}
