package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/replicate"
)

// A database of ordinary ids copied into an existing partitioned one,
// which refuses every id without a "partition:" prefix. CouchDB refuses a
// whole `_bulk_docs` and a whole `_revs_diff` (400 illegal_docid) for one
// such id. The first copy, whose empty target is not asked `_revs_diff`,
// lists each refused revision with CouchDB's words and copies the others
// (exit 3); a rerun, which asks `_revs_diff`, gives the same result rather
// than failing the database; a rerun after the source changed copies the
// new legal revisions and lists the new refused one; and a whole-server
// copy gives the same result.
func TestCouchOnly_PartitionedTargetIllegalIDs(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "partitioned databases exist on CouchDB only")
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	if err := tgt.Client().PutJSON(t.Context(), "/ids?partitioned=true", nil, nil); err != nil {
		t.Fatal(err)
	}
	// Legal and illegal ids interleaved, so that every request holds
	// both; an illegal one with two leaves (a conflict), one with an
	// attachment too large to go inline (written with a PUT of its own).
	var illegal []replicate.DocError // id and rev of each refused leaf
	var docs []json.RawMessage
	for i := range 12 {
		docs = append(docs, raw(`{"_id":"doc%02d","_rev":"1-a1","i":%d}`, i, i))
		illegal = append(illegal, replicate.DocError{ID: fmt.Sprintf("doc%02d", i), Rev: "1-a1"})
		docs = append(docs, raw(`{"_id":"p%d:doc%02d","_rev":"1-a1","i":%d}`, i%3, i, i))
	}
	docs = append(docs,
		raw(`{"_id":"conf","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}}`),
		raw(`{"_id":"conf","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]}}`),
		raw(`{"_id":"p:conf","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]}}`),
		raw(`{"_id":"p:conf","_rev":"2-c","_revisions":{"start":2,"ids":["c","a"]}}`),
		raw(`{"_id":"bigatt","_rev":"1-d","_attachments":{"a.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(randBytes(100000))),
		raw(`{"_id":"_design/v","_rev":"1-e","views":{"all":{"map":"function(d){emit(d._id)}"}}}`))
	illegal = append(illegal,
		replicate.DocError{ID: "conf", Rev: "2-b"}, replicate.DocError{ID: "conf", Rev: "2-c"},
		replicate.DocError{ID: "bigatt", Rev: "1-d"})
	coDocs(t, src, "ids", true, false, docs...)
	illegalIDs := func() []string {
		var ids []string
		for _, f := range illegal {
			if !slices.Contains(ids, f.ID) {
				ids = append(ids, f.ID)
			}
		}
		return ids
	}
	rec := recproxy.Start(t, tgt.URL)
	tgtDB := rec.UserURL(tgt.AdminUser, tgt.AdminPassword) + "/ids"

	// run copies the database by URL and checks that it lists exactly
	// the refused leaves, in CouchDB's words, and copied the rest.
	run := func(name string) resultDoc {
		t.Helper()
		r := cliRun(t, bin, "replicate", src.DBURL("ids"), tgtDB, "--json")
		r.wantCode(t, exitPartial)
		d := r.result(t)
		t.Logf("%s: stats %+v", name, d.Stats)
		if d.Status != "partial" || d.Error != "" {
			t.Errorf("%s: status %q, error %q, want partial and no error", name, d.Status, d.Error)
		}
		ptCheckFailures(t, name, d.Failures, d.Stats.DocWriteFailures, illegal)
		coOnlyMissing(t, src.DBURL("ids"), tgt.DBURL("ids"), illegalIDs()...)
		return d
	}
	first := run("first copy")
	n := len(rec.Exchanges())
	second := run("rerun")
	var refusedDiffs int
	for _, e := range rec.Exchanges()[n:] {
		if strings.HasSuffix(e.Path, "/_revs_diff") && e.Status == 400 {
			refusedDiffs++
		}
	}
	if refusedDiffs == 0 {
		t.Errorf("the rerun was never refused a _revs_diff: it did not meet the case")
	}
	if first.Stats.DocWriteFailures != second.Stats.DocWriteFailures || first.Status != second.Status {
		t.Errorf("rerun: %s with %d failures, first copy: %s with %d", second.Status, second.Stats.DocWriteFailures, first.Status, first.Stats.DocWriteFailures)
	}

	// The source changes: the new legal revisions are copied past the
	// refused ones, the new refused revision is listed.
	coDocs(t, src, "ids", false, false,
		raw(`{"_id":"p0:doc00","_rev":"2-b2","_revisions":{"start":2,"ids":["b2","a1"]},"edited":true}`),
		raw(`{"_id":"p9:new","_rev":"1-a1"}`),
		raw(`{"_id":"doc03","_rev":"2-b2","_revisions":{"start":2,"ids":["b2","a1"]},"edited":true}`))
	illegal = slices.DeleteFunc(illegal, func(f replicate.DocError) bool { return f.ID == "doc03" })
	illegal = append(illegal, replicate.DocError{ID: "doc03", Rev: "2-b2"})
	run("rerun after changes")

	// A whole-server copy into the same target database: the same.
	r := arSofa(t, bin, nil, "replicate", src.AdminURL(), tgt.AdminURL(), "--include", "ids", "--json")
	r.want(t, exitPartial)
	d := rbResult(t, r, "ids")
	if d.Status != "partial" {
		t.Errorf("whole-server copy: status %q, want partial", d.Status)
	}
	ptCheckFailures(t, "whole-server copy", d.Failures, d.DocWriteFailures, illegal)
	coOnlyMissing(t, src.DBURL("ids"), tgt.DBURL("ids"), illegalIDs()...)
}

// ptCheckFailures checks that failures (count of them: n) are exactly
// want's id and rev pairs, each an illegal_docid with CouchDB's reason.
func ptCheckFailures(t *testing.T, name string, failures []replicate.DocError, n int64, want []replicate.DocError) {
	t.Helper()
	key := func(f replicate.DocError) string { return f.ID + " " + f.Rev }
	var got, exp []string
	for _, f := range failures {
		got = append(got, key(f))
		if f.Error != "illegal_docid" || !strings.Contains(f.Reason, "partition") {
			t.Errorf("%s: failure %+v, want illegal_docid with CouchDB's reason", name, f)
		}
	}
	for _, f := range want {
		exp = append(exp, key(f))
	}
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) || n != int64(len(exp)) {
		t.Errorf("%s: %d doc_write_failures, failures %q; want %q", name, n, got, exp)
	}
}
