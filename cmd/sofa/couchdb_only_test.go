package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
)

// End-to-end cases that only Apache CouchDB can show: its size limits,
// validate_doc_update, accounts and _security, _revs_limit stemming,
// instance_start_time, _all_dbs paging, partitioned databases, and copies
// between CouchDB and PouchDB Server. Each runs the sofa binary and checks
// the outcome with couchtest's independent oracle.

// coDocs writes docs (raw JSON objects) into db with new_edits newEdits,
// creating db first when create is set.
func coDocs(t *testing.T, srv *couchtest.Server, db string, create, newEdits bool, docs ...json.RawMessage) {
	t.Helper()
	c := srv.Client()
	if create {
		if err := c.CreateDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
	}
	if len(docs) == 0 {
		return
	}
	if _, err := c.BulkDocs(t.Context(), db, newEdits, docs...); err != nil {
		t.Fatal(err)
	}
}

// coRev returns the winning rev of doc id in db ("" if missing).
func coRev(t *testing.T, srv *couchtest.Server, db, id string) string {
	t.Helper()
	var d struct {
		Rev string `json:"_rev"`
	}
	err := srv.Client().GetJSON(t.Context(), "/"+couchtest.EscapeDB(db)+"/"+couchtest.EscapeID(id), &d)
	if couchtest.StatusOf(err) == 404 {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return d.Rev
}

// coDiff compares two databases and returns the oracle's differences.
func coDiff(t *testing.T, src, dst string, opts couchtest.CompareOptions) *couchtest.Diff {
	t.Helper()
	d, err := couchtest.CompareDBs(t.Context(), src, dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// coOnlyMissing checks that the target differs from the source exactly by
// the documents ids missing on it (and nothing else).
func coOnlyMissing(t *testing.T, src, dst string, ids ...string) {
	t.Helper()
	d := coDiff(t, src, dst, couchtest.CompareOptions{MaxItems: 100})
	var want []string
	for _, id := range ids {
		want = append(want, fmt.Sprintf("doc %q: missing on target", id))
	}
	got := slices.Clone(d.Items)
	slices.Sort(got)
	slices.Sort(want)
	if d.Total != len(ids) || !slices.Equal(got, want) {
		t.Errorf("target should lack exactly %v; oracle: %s", ids, d)
	}
}

// A target whose [chttpd] max_http_request_size and [couchdb]
// max_document_size are lowered: batches above the request limit are
// split (bisection) and written, an attachment that fits alone travels in
// a request of its own, and what can never fit is reported per revision
// with its id, rev and CouchDB's reason; exit 3.
func TestCouchOnly_TargetSizeLimits(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's own request and document size limits")
	bin := sofaBin(t)
	src := couchtest.Start(t)
	tgt := couchtest.StartWith(t, couchtest.Options{Config: map[string]string{
		"chttpd/max_http_request_size": "65536", // 64 KiB
		"couchdb/max_document_size":    "20000",
	}})
	var docs []json.RawMessage
	for i := range 300 { // ~90 KB of small documents: more than one request
		docs = append(docs, raw(`{"_id":"s%03d","pad":%q}`, i, strings.Repeat("p", 200)))
	}
	docs = append(docs,
		raw(`{"_id":"bigbody","pad":%q}`, strings.Repeat("b", 30000)),                                                                   // over max_document_size
		raw(`{"_id":"att40k","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(randBytes(40000))),   // fits alone
		raw(`{"_id":"att100k","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(randBytes(100000))), // never fits
	)
	coDocs(t, src, "big", true, true, docs...)
	rec := recproxy.Start(t, tgt.URL)
	tgtURL := rec.UserURL(tgt.AdminUser, tgt.AdminPassword)

	r := cliRun(t, bin, "replicate", src.DBURL("big"), tgtURL+"/big", "--create-target", "--json")
	r.wantCode(t, exitPartial)
	d := r.result(t)
	t.Logf("stats %+v; failures %+v", d.Stats, d.Failures)
	if d.Stats.DocsWritten != 301 || d.Stats.DocWriteFailures != 2 || len(d.Failures) != 2 {
		t.Errorf("docs_written=%d doc_write_failures=%d failures=%d, want 301, 2, 2", d.Stats.DocsWritten, d.Stats.DocWriteFailures, len(d.Failures))
	}
	for _, f := range d.Failures {
		want := coRev(t, src, "big", f.ID)
		if (f.ID != "bigbody" && f.ID != "att100k") || f.Rev != want || f.Error == "" || f.Reason == "" {
			t.Errorf("failure %+v: want id bigbody or att100k, rev %s, an error and a reason", f, want)
		}
		if !strings.Contains(f.Error+f.Reason, "too_large") && !strings.Contains(f.Error+f.Reason, "too large") && !strings.Contains(f.Error+f.Reason, "413") {
			t.Errorf("failure %+v does not say the target found it too large", f)
		}
	}
	var n413 int
	var bulkMax int64
	var attPuts []int // the too-large attachment: alone in one request
	for _, e := range rec.Exchanges() {
		if e.Status == 413 {
			n413++
		}
		if e.Method == "PUT" && e.Path == "/big/att100k" {
			attPuts = append(attPuts, e.Status)
		}
		if strings.HasSuffix(e.Path, "/_bulk_docs") && e.Status < 300 && e.ReqBytes > bulkMax {
			bulkMax = e.ReqBytes
		}
	}
	t.Logf("target answered 413 %d times; largest accepted _bulk_docs %d bytes", n413, bulkMax)
	if n413 == 0 {
		t.Errorf("the target never answered 413: the limits were not met")
	}
	if !slices.Equal(attPuts, []int{413}) {
		t.Errorf("att100k was sent alone %d times (statuses %v), want once, refused 413", len(attPuts), attPuts)
	}
	if bulkMax > 65536 {
		t.Errorf("an accepted _bulk_docs carried %d bytes, over the 64 KiB limit", bulkMax)
	}
	coOnlyMissing(t, src.DBURL("big"), tgt.DBURL("big"), "bigbody", "att100k")
	for _, id := range []string{"bigbody", "att100k"} {
		if !strings.Contains(r.stderr, `id="`+id+`"`) && !strings.Contains(r.stdout, `"`+id+`"`) {
			t.Errorf("output does not name %s", id)
		}
	}
}

// A target design document whose validate_doc_update rejects some
// documents: CouchDB's forbidden answers are reported per revision (id,
// rev, reason), the others are written, exit 3.
func TestCouchOnly_ValidateDocUpdateForbidden(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "validate_doc_update runs on CouchDB's new_edits=false writes")
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	var docs []json.RawMessage
	for i := range 50 {
		docs = append(docs, raw(`{"_id":"d%02d","bad":%t}`, i, i%10 == 3))
	}
	coDocs(t, srv, "src", true, true, docs...)
	vdu := `function (newDoc) { if (newDoc.bad) { throw({forbidden: 'bad documents are refused: ' + newDoc._id}); } }`
	coDocs(t, srv, "tgt", true, true, raw(`{"_id":"_design/guard","validate_doc_update":%q}`, vdu))

	r := cliRun(t, bin, "replicate", srv.DBURL("src"), srv.DBURL("tgt"), "--json")
	r.wantCode(t, exitPartial)
	d := r.result(t)
	rejected := []string{"d03", "d13", "d23", "d33", "d43"}
	if d.Stats.DocsWritten != 45 || d.Stats.DocWriteFailures != 5 || len(d.Failures) != 5 {
		t.Errorf("docs_written=%d doc_write_failures=%d failures=%d, want 45, 5, 5", d.Stats.DocsWritten, d.Stats.DocWriteFailures, len(d.Failures))
	}
	for _, f := range d.Failures {
		if !slices.Contains(rejected, f.ID) || f.Rev != coRev(t, srv, "src", f.ID) || f.Error != "forbidden" || f.Reason != "bad documents are refused: "+f.ID {
			t.Errorf("failure %+v: want forbidden with the function's reason", f)
		}
	}
	// The target holds the 45 others and its own design document.
	dd := coDiff(t, srv.DBURL("src"), srv.DBURL("tgt"), couchtest.CompareOptions{MaxItems: 100})
	if dd.Total != 6 {
		t.Errorf("oracle: %s; want the 5 rejected documents missing and _design/guard only on the target", dd)
	}
	for _, id := range rejected {
		if !slices.Contains(dd.Items, fmt.Sprintf("doc %q: missing on target", id)) {
			t.Errorf("oracle does not list %s as missing: %s", id, dd)
		}
	}
}
