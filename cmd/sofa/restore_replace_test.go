package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
)

// rbDocs is the state of a database at backup time, written with
// new_edits=false so that it can be written twice, identically: into the
// database backed up and into an oracle copy no sofa command touches.
func rbDocs() []json.RawMessage {
	var docs []json.RawMessage
	for i := range 30 {
		docs = append(docs, arRaw(`{"_id":"p:d%02d","_rev":"1-a%02d","n":%d}`, i, i, i))
	}
	docs = append(docs,
		arRaw(`{"_id":"p:conflict","_rev":"2-b","v":"b","_revisions":{"start":2,"ids":["b","r"]}}`),
		arRaw(`{"_id":"p:conflict","_rev":"2-c","v":"c","_revisions":{"start":2,"ids":["c","r"]}}`),
		arRaw(`{"_id":"p:gone","_rev":"2-t","_deleted":true,"kept":1,"_revisions":{"start":2,"ids":["t","s"]}}`))
	return docs
}

// rbCreate creates db (partitioned on CouchDB) holding rbDocs, with sec as
// _security and _revs_limit 500.
func rbCreate(t *testing.T, srv *couchtest.Server, db string, sec any) {
	t.Helper()
	path := "/" + db
	if srv.Kind == couchtest.CouchDB {
		path += "?partitioned=true"
	}
	if err := srv.Client().PutJSON(t.Context(), path, nil, nil); err != nil {
		t.Fatal(err)
	}
	arWrite(t, srv, db, false, rbDocs()...)
	if err := srv.Client().PutSecurity(t.Context(), db, sec); err != nil {
		t.Fatal(err)
	}
	if srv.Kind == couchtest.CouchDB {
		if err := srv.Client().PutJSON(t.Context(), "/"+db+"/_revs_limit", 500, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// rbHeld is what db holds (GET /db): doc_count and doc_del_count (nil
// when the server does not report it).
func rbHeld(t *testing.T, srv *couchtest.Server, db string) fleet.Replaced {
	t.Helper()
	var info fleet.Replaced
	if err := srv.Client().GetJSON(t.Context(), "/"+db, &info); err != nil {
		t.Fatal(err)
	}
	return info
}

func equalCount(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func fmtCount(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return fmt.Sprint(*n)
}

// rbWarnings returns the result of db in a --json summary.
func rbResult(t *testing.T, r arRun, db string) fleet.DBResult {
	t.Helper()
	for _, d := range r.summary(t).DBs {
		if d.Name == db {
			return d
		}
	}
	t.Fatalf("no result for %s:\n%s", db, r.stdout)
	return fleet.DBResult{}
}

// An older backup restored over a database holding newer revisions:
// --reuse-existing only adds revisions, so nothing is rolled back, and the
// result says so per database (warning with the count of documents whose
// winner is not the archive's, "ok with warnings"); --replace deletes and
// recreates the database (partitioned flag and _security kept) and leaves
// exactly the backed-up state, compared with an oracle copy written
// independently of sofa. The two flags together are a usage error.
func TestRestore_OlderBackupOverNewerData(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	sec := couchtest.Security{Admins: couchtest.Group{Names: []string{"ann"}}, Members: couchtest.Group{Roles: []string{"staff"}}}
	rbCreate(t, srv, "db", sec)
	rbCreate(t, srv, "oracle", sec)
	path := filepath.Join(t.TempDir(), "old.sofa")
	arSofa(t, bin, nil, "backup", srv.URL, path, "-q", "--include", "db").want(t, exitOK)

	// Newer data: 5 documents updated, 2 deleted, 1 given a newer branch
	// of its own, 3 new ones; _security changed.
	var newer []json.RawMessage
	for i := range 5 {
		newer = append(newer, arRaw(`{"_id":"p:d%02d","_rev":"1-a%02d","n":%d,"updated":true}`, i, i, i))
	}
	for i := 5; i < 7; i++ {
		newer = append(newer, arRaw(`{"_id":"p:d%02d","_rev":"1-a%02d","_deleted":true}`, i, i))
	}
	newer = append(newer, arRaw(`{"_id":"p:new1"}`), arRaw(`{"_id":"p:new2"}`), arRaw(`{"_id":"p:new3"}`))
	arWrite(t, srv, "db", true, newer...)
	arWrite(t, srv, "db", false, arRaw(`{"_id":"p:d07","_rev":"3-z","branch":true,"_revisions":{"start":3,"ids":["z","y","x"]}}`))
	if err := srv.Client().PutSecurity(t.Context(), "db", map[string]any{"members": map[string]any{"names": []string{"eve"}}}); err != nil {
		t.Fatal(err)
	}
	const notRolledBack = 8 // d00-d04, d05-d06, d07

	// --reuse-existing: exit 0, nothing written, and a warning with the
	// count (after one that eve's _security was replaced).
	r := arSofa(t, bin, nil, "restore", path, srv.URL, "--reuse-existing", "--json")
	r.want(t, exitOK)
	d := rbResult(t, r, "db")
	want := fmt.Sprintf("not rolled back: %d of %d documents", notRolledBack, 32)
	if d.Status != fleet.StatusOK || len(d.Warnings) != 2 || !strings.Contains(d.Warnings[0], `_security replaced`) || !strings.Contains(d.Warnings[0], `"eve"`) || !strings.Contains(d.Warnings[1], want) {
		t.Errorf("--reuse-existing over newer data: status %s, warnings %q; want ok with a warning of eve's _security replaced and one %q", d.Status, d.Warnings, want)
	}
	r = arSofa(t, bin, nil, "restore", path, srv.URL, "--reuse-existing")
	r.want(t, exitOK)
	if !strings.Contains(r.stderr, `database "db": ok with warnings`) || !strings.Contains(r.stderr, want) {
		t.Errorf("human summary lacks %q and %q:\n%s", `database "db": ok with warnings`, want, r.stderr)
	}

	// Both flags: usage error, nothing touched.
	before := arDocCount(t, srv, "db")
	r = arSofa(t, bin, nil, "restore", path, srv.URL, "--reuse-existing", "--replace")
	r.want(t, exitUsage)
	if !strings.Contains(r.errLine(t), "--replace") {
		t.Errorf("usage error does not name --replace: %s", r.errLine(t))
	}
	if n := arDocCount(t, srv, "db"); n != before {
		t.Fatalf("after the usage error: %d documents, want %d (untouched)", n, before)
	}

	// --replace: rolled back to exactly the archive's state; --json
	// lists the database replaced with what it held.
	held := rbHeld(t, srv, "db")
	r = arSofa(t, bin, nil, "restore", path, srv.URL, "--replace", "--json")
	r.want(t, exitOK)
	if got := r.summary(t).Replaced; len(got) != 1 || got[0].Name != "db" || got[0].DocCount != held.DocCount || !equalCount(got[0].DocDelCount, held.DocDelCount) {
		t.Errorf("--replace --json: replaced %+v, want db with doc_count %d, doc_del_count %v", got, held.DocCount, fmtCount(held.DocDelCount))
	}
	if d := rbResult(t, r, "db"); d.Status != fleet.StatusOK || len(d.Warnings) != 0 || d.DocsWritten != 33 {
		t.Errorf("--replace: status %s, docs_written %d, warnings %q; want ok, 33, none", d.Status, d.DocsWritten, d.Warnings)
	}
	couchtest.AssertEqual(t, srv.DBURL("oracle"), srv.DBURL("db"), couchtest.CompareOptions{Security: true, RevsLimit: true})
	// and its line, before the database is deleted
	held = rbHeld(t, srv, "db")
	r = arSofa(t, bin, nil, "restore", path, srv.URL, "--replace")
	r.want(t, exitOK)
	want = fmt.Sprintf(`sofa: replacing "db" on the target: deleting it (%d documents, %s deleted)`+"\n", held.DocCount, fmtCount(held.DocDelCount))
	if held.DocDelCount == nil {
		want = fmt.Sprintf(`sofa: replacing "db" on the target: deleting it (%d documents; the server does not report its deleted ones)`+"\n", held.DocCount)
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("--replace: stderr lacks %q:\n%s", want, r.stderr)
	}
	couchtest.AssertEqual(t, srv.DBURL("oracle"), srv.DBURL("db"), couchtest.CompareOptions{Security: true, RevsLimit: true})
	if srv.Kind == couchtest.CouchDB {
		var info struct {
			Props struct {
				Partitioned bool `json:"partitioned"`
			} `json:"props"`
		}
		if err := srv.Client().GetJSON(t.Context(), "/db", &info); err != nil {
			t.Fatal(err)
		}
		if !info.Props.Partitioned {
			t.Errorf("--replace lost props.partitioned")
		}
	}
}

// TestRestore_ReplaceTakesArchivePartitioned: --replace rolls a database
// back to the archive, its partitioned property included: an archive of
// a plain database restored over a partitioned one (which would refuse
// every id without a partition prefix) and an archive of a partitioned
// database over a plain one both end with the archive's property and
// every document.
func TestRestore_ReplaceTakesArchivePartitioned(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "partitioned databases")
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	c := srv.Client()
	partitioned := func(db string) bool {
		t.Helper()
		var info struct {
			Props struct {
				Partitioned bool `json:"partitioned"`
			} `json:"props"`
		}
		if err := c.GetJSON(t.Context(), "/"+db, &info); err != nil {
			t.Fatal(err)
		}
		return info.Props.Partitioned
	}
	create := func(db string, part bool, docs ...json.RawMessage) {
		t.Helper()
		path := "/" + db
		if part {
			path += "?partitioned=true"
		}
		if err := c.PutJSON(t.Context(), path, nil, nil); err != nil {
			t.Fatal(err)
		}
		arWrite(t, srv, db, true, docs...)
	}
	create("flat", false, arRaw(`{"_id":"a","v":1}`), arRaw(`{"_id":"b","v":2}`))
	create("parted", true, arRaw(`{"_id":"p:a","v":1}`), arRaw(`{"_id":"q:b","v":2}`))
	path := filepath.Join(t.TempDir(), "a.sofa")
	arSofa(t, bin, nil, "backup", srv.URL, path, "-q", "--include", "flat", "--include", "parted").want(t, exitOK)
	for db, part := range map[string]bool{"flat": false, "parted": true} {
		if err := c.DeleteDB(t.Context(), db); err != nil {
			t.Fatal(err)
		}
		create(db, !part, arRaw(`{"_id":"p:other","v":3}`))
	}
	arSofa(t, bin, nil, "restore", path, srv.URL, "--include", "flat", "--include", "parted", "--replace").want(t, exitOK)
	for db, part := range map[string]bool{"flat": false, "parted": true} {
		if got := partitioned(db); got != part {
			t.Errorf("%s after --replace: partitioned %v, want the archive's %v", db, got, part)
		}
		if n := arDocCount(t, srv, db); n != 2 {
			t.Errorf("%s after --replace: %d documents, want the archive's 2", db, n)
		}
	}
}
