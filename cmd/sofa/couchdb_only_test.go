package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// Accounts: a reader-only source account, a non-admin target account,
// _security with admins and members, and _users with --with-users.
//
// The source database is made read-only for its reader the CouchDB way:
// _security members [reader] plus a validate_doc_update that refuses
// every document write by non-admins (couchtest.MakeReadOnly). CouchDB
// still lets members write _local documents, so the recording proxy in
// front of the source checks that sofa sent it no write at all (its
// checkpoints go to the target by default). The target account is a
// plain member of the target database: it can write documents but not
// design documents, so the source's design document is reported
// (forbidden) and everything else copied.
func TestCouchOnly_Accounts(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's members, validate_doc_update and _users")
	bin := sofaBin(t)
	src := couchtest.StartWith(t, couchtest.Options{Users: map[string]string{"reader": "r-pw"}})
	tgt := couchtest.StartWith(t, couchtest.Options{Users: map[string]string{"writer": "w-pw"}})
	ctx := t.Context()

	coDocs(t, src, "sales", true, false,
		raw(`{"_id":"o1","_rev":"2-b","v":2,"_revisions":{"start":2,"ids":["b","a"]}}`),
		raw(`{"_id":"o1","_rev":"2-c","v":3,"_revisions":{"start":2,"ids":["c","a"]}}`),
		raw(`{"_id":"o2","_rev":"3-z","_deleted":true,"_revisions":{"start":3,"ids":["z","y","x"]}}`),
		raw(`{"_id":"o3","_rev":"1-q","_attachments":{"r.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(randBytes(20000))))
	if err := src.Client().MakeReadOnly(ctx, "sales", "reader"); err != nil {
		t.Fatal(err)
	}
	// The setup holds: the reader cannot write documents.
	reader := couchtest.NewClient(src.UserURL("reader", "r-pw"))
	if _, err := reader.PutDoc(ctx, "sales", "probe", map[string]any{}); couchtest.StatusOf(err) != 403 {
		t.Fatalf("reader's write: %v, want 403 forbidden", err)
	}
	coDocs(t, tgt, "sales", true, true)
	if err := tgt.Client().PutSecurity(ctx, "sales", couchtest.Security{Members: couchtest.Group{Names: []string{"writer"}}}); err != nil {
		t.Fatal(err)
	}

	rec := recproxy.Start(t, src.URL)
	r := cliRun(t, bin, "replicate", rec.UserURL("reader", "r-pw")+"/sales", tgt.UserURL("writer", "w-pw")+"/sales", "--json")
	r.wantCode(t, exitPartial)
	d := r.result(t)
	if len(d.Failures) != 1 || d.Failures[0].ID != couchtest.ReadOnlyDesignID || d.Failures[0].Error != "forbidden" || d.Failures[0].Rev != coRev(t, src, "sales", couchtest.ReadOnlyDesignID) {
		t.Errorf("failures %+v, want only the design document, forbidden to a member", d.Failures)
	}
	if d.Stats.DocsWritten != 4 {
		t.Errorf("docs_written=%d, want 4 (every leaf)", d.Stats.DocsWritten)
	}
	coOnlyMissing(t, src.DBURL("sales"), tgt.DBURL("sales"), couchtest.ReadOnlyDesignID)
	for _, e := range rec.Exchanges() {
		read := e.Method == "GET" || e.Method == "HEAD" ||
			e.Method == "POST" && (strings.HasSuffix(e.Path, "/_bulk_get") || strings.HasSuffix(e.Path, "/_all_docs") || strings.HasSuffix(e.Path, "/_changes"))
		if !read {
			t.Errorf("sofa wrote to the read-only source: %s %s -> %d", e.Method, e.Path, e.Status)
		}
	}

	// Whole-server copy of a database with admins and members, and of
	// _users (--with-users): the reader can then log in on the target.
	sec := couchtest.Security{
		Admins:  couchtest.Group{Names: []string{"ann"}, Roles: []string{"ops"}},
		Members: couchtest.Group{Names: []string{"bob", "reader"}, Roles: []string{"staff"}},
	}
	coDocs(t, src, "sec", true, true, raw(`{"_id":"a"}`), raw(`{"_id":"b"}`))
	if err := src.Client().PutSecurity(ctx, "sec", sec); err != nil {
		t.Fatal(err)
	}
	r2 := cliRun(t, bin, "replicate", src.AdminURL(), tgt.AdminURL(), "--include", "sec", "--include", "_users", "--with-users", "--json")
	s := sofaRun{code: r2.code, stdout: r2.stdout, stderr: r2.stderr}.summary(t)
	// CouchDB refuses any PUT /_users/_security: sofa must not fail
	// _users for it (the object belongs to the server).
	if r2.code != exitOK || s.DBsTotal != 2 || s.DBsOK != 2 {
		t.Errorf("server copy: exit %d, %d databases, %d ok; want 0 and _users and sec ok", r2.code, s.DBsTotal, s.DBsOK)
	}
	for _, db := range s.DBs {
		if db.Status != "ok" {
			t.Errorf("database %s: %s %s", db.Name, db.Status, db.Error)
		}
	}
	couchtest.AssertEqual(t, src.DBURL("sec"), tgt.DBURL("sec"), couchtest.CompareOptions{Security: true, RevsLimit: true})
	const uid = "org.couchdb.user:reader"
	if sr, tr := coRev(t, src, "_users", uid), coRev(t, tgt, "_users", uid); sr == "" || sr != tr {
		t.Errorf("user document on the target: rev %q, source %q", tr, sr)
	}
	if tr := coRev(t, tgt, "_users", "org.couchdb.user:writer"); tr == "" {
		t.Errorf("the target's own user was lost")
	}
	var session struct {
		UserCtx struct {
			Name string `json:"name"`
		} `json:"userCtx"`
	}
	if err := couchtest.NewClient(tgt.UserURL("reader", "r-pw")).GetJSON(ctx, "/_session", &session); err != nil || session.UserCtx.Name != "reader" {
		t.Errorf("reader on the target after --with-users: %v, session %+v", err, session)
	}
	var all struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := couchtest.NewClient(tgt.UserURL("reader", "r-pw")).GetJSON(ctx, "/sec/_all_docs", &all); err != nil || len(all.Rows) != 2 {
		t.Errorf("reader (a member of sec) reading sec on the target: %v, %d rows", err, len(all.Rows))
	}
}

// _revs_limit 7 on the source is set on the target before any document
// (at the recording proxy: PUT _revs_limit precedes the first _bulk_docs),
// and a document updated 20 times keeps 7 revisions of history on both
// sides, as CouchDB stems it.
func TestCouchOnly_RevsLimitStemming(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "PouchDB Server has no _revs_limit")
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	c := src.Client()
	ctx := t.Context()
	coDocs(t, src, "stem", true, true)
	if err := c.PutJSON(ctx, "/stem/_revs_limit", 7, nil); err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"n": 0}
	for i := range 21 {
		doc["n"] = i
		rev, err := c.PutDoc(ctx, "stem", "u", doc)
		if err != nil {
			t.Fatal(err)
		}
		doc["_rev"] = rev
	}
	coDocs(t, src, "stem", false, true, raw(`{"_id":"other"}`))
	rec := recproxy.Start(t, tgt.URL)
	r := cliRun(t, bin, "replicate", src.DBURL("stem"), rec.UserURL(tgt.AdminUser, tgt.AdminPassword)+"/stem", "--create-target")
	r.wantCode(t, exitOK)
	couchtest.AssertEqual(t, src.DBURL("stem"), tgt.DBURL("stem"), couchtest.CompareOptions{RevsLimit: true, Security: true})
	limitAt, firstWrite := -1, -1
	for i, e := range rec.Exchanges() {
		if e.Method == "PUT" && e.Path == "/stem/_revs_limit" && limitAt < 0 {
			limitAt = i
		}
		if (strings.HasSuffix(e.Path, "/_bulk_docs") || e.Method == "PUT" && strings.HasPrefix(e.Path, "/stem/u")) && firstWrite < 0 {
			firstWrite = i
		}
	}
	if limitAt < 0 || firstWrite < 0 || limitAt > firstWrite {
		t.Errorf("PUT _revs_limit at request %d, first document write at %d: want the limit first", limitAt, firstWrite)
	}
	for _, s := range []*couchtest.Server{src, tgt} {
		var got struct {
			Revisions struct {
				Start int      `json:"start"`
				IDs   []string `json:"ids"`
			} `json:"_revisions"`
		}
		if err := s.Client().GetJSON(ctx, "/stem/u?revs=true", &got); err != nil {
			t.Fatal(err)
		}
		if got.Revisions.Start != 21 || len(got.Revisions.IDs) != 7 {
			t.Errorf("%s: u's history starts at %d with %d revisions, want 21 and 7 (stemmed)", s.URL[strings.LastIndex(s.URL, "@")+1:], got.Revisions.Start, len(got.Revisions.IDs))
		}
	}
	var lim int
	if err := tgt.Client().GetJSON(ctx, "/stem/_revs_limit", &lim); err != nil || lim != 7 {
		t.Errorf("target _revs_limit %d (%v), want 7", lim, err)
	}
}

// A source database deleted and recreated between two runs has a new
// instance_start_time: the second run copies the new database from its
// start and warns that the target keeps the old database's documents.
func TestCouchOnly_RecreatedSource(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "instance_start_time changes on CouchDB only")
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	var old []json.RawMessage
	for i := range 30 {
		old = append(old, raw(`{"_id":"old%02d"}`, i))
	}
	coDocs(t, srv, "re", true, true, old...)
	var info1, info2 struct {
		Start string `json:"instance_start_time"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/re", &info1); err != nil {
		t.Fatal(err)
	}
	cliRun(t, bin, "replicate", srv.DBURL("re"), srv.DBURL("copy"), "--create-target").wantCode(t, exitOK)

	if err := srv.Client().DeleteDB(t.Context(), "re"); err != nil {
		t.Fatal(err)
	}
	var fresh []json.RawMessage
	for i := range 10 {
		fresh = append(fresh, raw(`{"_id":"new%02d","v":%d}`, i, i))
	}
	// instance_start_time has a resolution of one second: recreate the
	// database until it differs (at most once more, once the clock ticked).
	for attempt := 0; ; attempt++ {
		coDocs(t, srv, "re", true, true)
		if err := srv.Client().GetJSON(t.Context(), "/re", &info2); err != nil {
			t.Fatal(err)
		}
		if info1.Start != info2.Start {
			break
		}
		if attempt == 3 {
			t.Fatalf("instance_start_time did not change (%s)", info1.Start)
		}
		if err := srv.Client().DeleteDB(t.Context(), "re"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 10*time.Millisecond)))
	}
	coDocs(t, srv, "re", false, true, fresh...)
	r := cliRun(t, bin, "replicate", srv.DBURL("re"), srv.DBURL("copy"), "--json")
	r.wantCode(t, exitOK)
	d := r.result(t)
	if d.Stats.ChangesRead != 10 || d.Stats.DocsWritten != 10 {
		t.Errorf("second run read %d changes and wrote %d, want the new database from its start (10, 10)", d.Stats.ChangesRead, d.Stats.DocsWritten)
	}
	if !slices.ContainsFunc(d.Warnings, func(w string) bool { return strings.Contains(w, "recreated") }) {
		t.Errorf("no warning about the recreated source: %q; stderr %s", d.Warnings, r.stderr)
	}
	for i := range 10 {
		id := fmt.Sprintf("new%02d", i)
		if sr, tr := coRev(t, srv, "re", id), coRev(t, srv, "copy", id); sr != tr {
			t.Errorf("%s: target rev %q, source %q", id, tr, sr)
		}
	}
	if tr := coRev(t, srv, "copy", "old00"); tr == "" {
		t.Errorf("the old database's documents were removed from the target")
	}
}

// coPartitioned checks that db on srv is partitioned and holds the two
// documents of partition sensor-a.
func coPartitioned(t *testing.T, srv *couchtest.Server, db string) {
	t.Helper()
	var info struct {
		Props struct {
			Partitioned bool `json:"partitioned"`
		} `json:"props"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/"+db, &info); err != nil {
		t.Fatal(err)
	}
	if !info.Props.Partitioned {
		t.Errorf("%s: props.partitioned is false on the target", db)
	}
	var part struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
	}
	if err := srv.Client().GetJSON(t.Context(), "/"+db+"/_partition/sensor-a/_all_docs", &part); err != nil {
		t.Errorf("%s: partition query: %v", db, err)
		return
	}
	if len(part.Rows) != 2 || part.Rows[0].ID != "sensor-a:1" || part.Rows[1].ID != "sensor-a:2" {
		t.Errorf("%s: partition sensor-a holds %+v, want sensor-a:1 and sensor-a:2", db, part.Rows)
	}
}

// A partitioned database (ids "partition:doc") is created partitioned on
// the target and copied, by a database copy with --create-target, by a
// server copy and by backup then restore.
func TestCouchOnly_Partitioned(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "partitioned databases exist on CouchDB only")
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	if err := src.Client().PutJSON(t.Context(), "/parts?partitioned=true", nil, nil); err != nil {
		t.Fatal(err)
	}
	coDocs(t, src, "parts", false, false,
		raw(`{"_id":"sensor-a:1","_rev":"1-a","t":20.5}`),
		raw(`{"_id":"sensor-a:2","_rev":"2-b","t":21,"_revisions":{"start":2,"ids":["b","a"]}}`),
		raw(`{"_id":"sensor-a:2","_rev":"2-c","t":22,"_revisions":{"start":2,"ids":["c","a"]}}`),
		raw(`{"_id":"sensor-b:1","_rev":"1-d","_attachments":{"x.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64(randBytes(3000))),
		raw(`{"_id":"sensor-b:2","_rev":"2-e","_deleted":true,"_revisions":{"start":2,"ids":["e","d"]}}`),
		raw(`{"_id":"_design/by_t","_rev":"1-f","views":{"t":{"map":"function(d){emit(d.t)}"}}}`))
	cmp := couchtest.CompareOptions{Security: true, RevsLimit: true}

	cliRun(t, bin, "replicate", src.DBURL("parts"), tgt.DBURL("dbcopy"), "--create-target").wantCode(t, exitOK)
	couchtest.AssertEqual(t, src.DBURL("parts"), tgt.DBURL("dbcopy"), cmp)
	coPartitioned(t, tgt, "dbcopy")

	cliRun(t, bin, "replicate", src.AdminURL(), tgt.AdminURL(), "--include", "parts").wantCode(t, exitOK)
	couchtest.AssertEqual(t, src.DBURL("parts"), tgt.DBURL("parts"), cmp)
	coPartitioned(t, tgt, "parts")

	archive := t.TempDir() + "/parts.sofa"
	cliRun(t, bin, "backup", src.AdminURL(), archive, "--include", "parts").wantCode(t, exitOK)
	cliRun(t, bin, "restore", archive, tgt.AdminURL(), "--rename", "parts=restored").wantCode(t, exitOK)
	couchtest.AssertEqual(t, src.DBURL("parts"), tgt.DBURL("restored"), cmp)
	coPartitioned(t, tgt, "restored")
}

// 1,200 databases: more than one page of _all_dbs as sofa reads it (1,000
// names a page). A whole-server copy pages past the first page (seen at
// the recording proxy) and every database is present on the target.
func TestCouchOnly_AllDBsPaging(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "1,200 databases need CouchDB's on-disk storage")
	bin := sofaBin(t)
	one := couchtest.Options{Config: map[string]string{"cluster/q": "1"}} // one shard a database: fast to create
	src, tgt := couchtest.StartWith(t, one), couchtest.StartWith(t, one)
	const n = 1200
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("db-%04d", i)
	}
	c := src.Client()
	work := make(chan string)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for name := range work {
				if err := c.CreateDB(t.Context(), name); err != nil {
					errs <- err
					continue
				}
				if name[len(name)-2:] == "00" {
					_, err := c.PutDoc(t.Context(), name, "only", map[string]any{"db": name})
					if err != nil {
						errs <- err
					}
				}
			}
		})
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	rec := recproxy.Start(t, src.URL)
	r := cliRun(t, bin, "replicate", rec.UserURL(src.AdminUser, src.AdminPassword), tgt.AdminURL(), "--json", "--verify", "none")
	r.wantCode(t, exitOK)
	s := sofaRun{code: r.code, stdout: r.stdout}.summary(t)
	t.Logf("%d databases; source requests %v", s.DBsTotal, s.RequestsByKind["source"])
	if s.DBsTotal != n || s.DBsOK != n {
		t.Errorf("summary: %d databases, %d ok; want %d", s.DBsTotal, s.DBsOK, n)
	}
	pages := rec.Filter("GET", "/_all_dbs")
	if len(pages) < 2 {
		t.Errorf("_all_dbs read in %d request(s): want paging past the first page", len(pages))
	}
	var got []string
	if err := tgt.Client().GetJSON(t.Context(), "/_all_dbs", &got); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !slices.Contains(got, name) {
			t.Errorf("target lacks %s", name)
		}
	}
	for _, name := range []string{"db-0000", "db-0700", "db-1100"} {
		couchtest.AssertEqual(t, src.DBURL(name), tgt.DBURL(name))
	}
	// _dbs_info (one request for many databases' info) is not used.
	if dbsInfo := rec.Filter("", "/_dbs_info"); len(dbsInfo) != 0 {
		t.Logf("sofa used _dbs_info %d times", len(dbsInfo))
	}
}

// Server copies between Apache CouchDB and PouchDB Server, both ways, of
// databases with conflicts, tombstones and attachments: equal (PouchDB
// Server rewrites revpos, see couchtest.CompareOptions.PouchDBRevpos).
func TestCouchOnly_CouchPouchBothWays(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "needs both vendors; runs once, in the CouchDB pass")
	bin := sofaBin(t)
	couch := couchtest.Start(t)
	pouch := couchtest.StartKind(t, couchtest.PouchDB)
	fill := func(srv *couchtest.Server, db string) {
		coDocs(t, srv, db, true, false,
			raw(`{"_id":"c","_rev":"2-a","v":1,"_revisions":{"start":2,"ids":["a","r"]},"_attachments":{"a.txt":{"content_type":"text/plain","revpos":2,"data":%q}}}`, b64([]byte(strings.Repeat("text ", 400)))),
			raw(`{"_id":"c","_rev":"2-b","v":2,"_revisions":{"start":2,"ids":["b","r"]},"_attachments":{"b.bin":{"content_type":"application/octet-stream","revpos":1,"data":%q}}}`, b64(randBytes(10000))),
			raw(`{"_id":"c","_rev":"3-d","_deleted":true,"_revisions":{"start":3,"ids":["d","x","r"]}}`),
			raw(`{"_id":"tomb","_rev":"2-t","_deleted":true,"note":"kept","_revisions":{"start":2,"ids":["t","s"]}}`),
			raw(`{"_id":"plain","_rev":"1-p","n":1.5,"s":"é"}`))
		coDocs(t, srv, db, false, true, raw(`{"_id":"img","_attachments":{"i.png":{"content_type":"image/png","data":%q}}}`, b64(tinyPNG)))
	}
	for _, db := range []string{"c-one", "c-two", "c-three"} {
		fill(couch, db)
	}
	for _, db := range []string{"p-one", "p-two"} {
		fill(pouch, db)
	}
	// CouchDB stores text attachments gzip-compressed and digests the
	// stored bytes; PouchDB Server digests identity bytes: the oracle
	// compares their bytes, lengths and types instead.
	cmp := couchtest.CompareOptions{PouchDBRevpos: true, DigestsByKind: true, MaxItems: 100}
	equal := func(a, b string) {
		t.Helper()
		if d := coDiff(t, a, b, cmp); !d.Equal() {
			t.Errorf("%s vs %s: %s", a[strings.LastIndex(a, "/"):], b[strings.LastIndex(b, "/"):], d)
		}
	}

	// --verify none: the oracle checks the copies; sofa's own check
	// between vendors is run last.
	r := cliRun(t, bin, "replicate", couch.AdminURL(), pouch.AdminURL(), "--include", "c-*", "--json", "--verify", "none")
	r.wantCode(t, exitOK)
	if s := (sofaRun{stdout: r.stdout}).summary(t); s.DBsTotal != 3 || s.DBsOK != 3 {
		t.Errorf("CouchDB to PouchDB Server: %d databases, %d ok", s.DBsTotal, s.DBsOK)
	}
	for _, db := range []string{"c-one", "c-two", "c-three"} {
		equal(couch.DBURL(db), pouch.DBURL(db))
	}

	r = cliRun(t, bin, "replicate", pouch.AdminURL(), couch.AdminURL(), "--include", "p-*", "--json", "--verify", "none")
	r.wantCode(t, exitOK)
	if s := (sofaRun{stdout: r.stdout}).summary(t); s.DBsTotal != 2 || s.DBsOK != 2 {
		t.Errorf("PouchDB Server to CouchDB: %d databases, %d ok", s.DBsTotal, s.DBsOK)
	}
	for _, db := range []string{"p-one", "p-two"} {
		equal(pouch.DBURL(db), couch.DBURL(db))
	}

	// sofa's own post-copy check (--verify cheap, the default) on the
	// equal copies: a rerun copies nothing and must find them equal
	// (PouchDB Server reports no doc_del_count; digests differ by vendor).
	for _, dir := range [][3]string{{couch.AdminURL(), pouch.AdminURL(), "c-*"}, {pouch.AdminURL(), couch.AdminURL(), "p-*"}} {
		r = cliRun(t, bin, "replicate", dir[0], dir[1], "--include", dir[2], "--json")
		r.wantCode(t, exitOK)
	}
}

// A target with small request and document limits: a `_revs_diff` over
// max_http_request_size (413) is split in halves until each part fits,
// not fatal; and a first document whose id alone is over
// max_document_size does not make the checkpoint (which names one
// revision of the source, its anchor) too large for the target, which
// would fail every run at its first checkpoint.
func TestCouchOnly_SmallLimitsRevsDiffAndCheckpoint(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's own request and document size limits")
	bin := sofaBin(t)
	src := couchtest.Start(t)
	tgt := couchtest.StartWith(t, couchtest.Options{Config: map[string]string{
		"chttpd/max_http_request_size": "50000",
		"couchdb/max_document_size":    "5000",
	}})
	var docs []json.RawMessage
	for i := range 1000 { // about 110 KB of ids in one _revs_diff
		docs = append(docs, raw(`{"_id":"%s-%04d","v":%d}`, strings.Repeat("m", 100), i, i))
	}
	coDocs(t, src, "midids", true, true, docs...)
	coDocs(t, tgt, "midids", true, true, raw(`{"_id":"other"}`))
	r := cliRun(t, bin, "replicate", src.DBURL("midids"), tgt.AdminURL()+"/midids", "--json")
	r.wantCode(t, exitOK)
	if d := r.result(t); d.Stats.DocsWritten != 1000 {
		t.Errorf("midids: docs_written=%d, want 1000", d.Stats.DocsWritten)
	}

	docs = []json.RawMessage{raw(`{"_id":"%s"}`, strings.Repeat("a", 6000))}
	for i := range 600 {
		docs = append(docs, raw(`{"_id":"s%04d"}`, i))
	}
	coDocs(t, src, "anchor", true, true, docs...)
	for run := 1; run <= 2; run++ {
		r = cliRun(t, bin, "replicate", src.DBURL("anchor"), tgt.AdminURL()+"/anchor", "--create-target", "--batch-size", "100", "--json")
		r.wantCode(t, exitOK)
		if d := r.result(t); run == 2 && d.Stats.DocsWritten != 0 {
			t.Errorf("anchor: the second run wrote %d, want 0 (resumed from its checkpoint)", d.Stats.DocsWritten)
		}
	}
}

// A source and a target with a small max_http_request_size: the
// source's `_bulk_get` and a restore's winner check (`_all_docs` with
// keys) over it (413) are asked in parts, not fatal.
func TestCouchOnly_SmallRequestLimitReads(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB's own request size limit")
	bin := sofaBin(t)
	limited := couchtest.Options{Config: map[string]string{"chttpd/max_http_request_size": "30000"}}
	src := couchtest.StartWith(t, limited)
	var docs []json.RawMessage
	for i := range 1000 { // about 110 KB of ids in one request of each kind
		docs = append(docs, raw(`{"_id":"%s-%04d","v":%d}`, strings.Repeat("b", 100), i, i))
	}
	for i := 0; i < len(docs); i += 100 { // each write under the limit
		coDocs(t, src, "ids", i == 0, true, docs[i:i+100]...)
	}
	tgt := couchtest.StartWith(t, limited)
	r := cliRun(t, bin, "replicate", src.DBURL("ids"), tgt.AdminURL()+"/ids", "--create-target", "--json")
	r.wantCode(t, exitOK)
	if d := r.result(t); d.Stats.DocsWritten != 1000 {
		t.Errorf("replicate: docs_written=%d, want 1000", d.Stats.DocsWritten)
	}
	arch := filepath.Join(t.TempDir(), "ids.sofa")
	cliRun(t, bin, "backup", src.DBURL("ids"), arch, "-q").wantCode(t, exitOK)
	// into the existing database: the restore compares winners after
	r = cliRun(t, bin, "restore", arch, tgt.AdminURL()+"/ids", "--reuse-existing")
	r.wantCode(t, exitOK)
}
