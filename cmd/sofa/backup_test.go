package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// `sofa backup` (issue 5, point 2): never writes to the source, covers the
// right databases, writes archive files safely.

// readOnlyRequest reports whether a request to a source only reads: GET,
// HEAD, or a POST to an endpoint that reads (_bulk_get, _all_docs,
// _changes).
func readOnlyRequest(r recorded) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodPost:
		return strings.HasSuffix(r.Path, "/_bulk_get") || strings.HasSuffix(r.Path, "/_all_docs") || strings.HasSuffix(r.Path, "/_changes") ||
			strings.HasSuffix(r.Path, "/_revs_diff") || // asks which revisions exist; writes nothing
			r.Path == "/_dbs_info" // the info of the databases named
	}
	return false
}

// TestBackup_NeverWritesSource backs up, fully then incrementally, with a
// read-only user (members + a validate_doc_update refusing its writes; it
// could still write _local documents) through a recording proxy: every
// request the source receives only reads, none touches a _local document
// other than to GET it, and both backups succeed.
func TestBackup_NeverWritesSource(t *testing.T) {
	bin := sofaBin(t)
	const pw = "admin-pw"
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: pw, Users: map[string]string{"reader": "reader-pw"}})
	arCreate(t, srv, "ro", true, arSmallDocs("d", 200)...)
	arWrite(t, srv, "ro", true, arRaw(`{"_id":"att","_attachments":{"a.txt":{"content_type":"text/plain","data":"aGVsbG8gd29ybGQ="}}}`))
	if err := srv.Client().MakeReadOnly(t.Context(), "ro", "reader"); err != nil {
		t.Fatal(err)
	}
	rec := startRecorder(t, srv.URL)
	srcURL := withCreds(rec.URL, srv.UserURL("reader", "reader-pw")) + "/ro"
	dir := t.TempDir()
	full, inc := filepath.Join(dir, "full.sofa"), filepath.Join(dir, "inc.sofa")
	arSofa(t, bin, nil, "backup", srcURL, full, "-q").want(t, exitOK)
	arWrite(t, srv, "ro", true, arSmallDocs("e", 20)...) // as admin
	arSofa(t, bin, nil, "backup", srcURL, inc, "--since", full, "-q").want(t, exitOK)

	reqs := rec.requests()
	if len(reqs) == 0 {
		t.Fatal("no request went through the recorder")
	}
	for _, r := range reqs {
		if !readOnlyRequest(r) {
			t.Errorf("backup sent a writing request to the source: %s", r)
		}
		if strings.Contains(r.Path, "_local") && r.Method != http.MethodGet {
			t.Errorf("backup touched a _local document: %s", r)
		}
	}
	if l := arLs(t, bin, inc).db(t, "ro"); l.Revisions != 20 || len(l.Since) == 0 {
		t.Errorf("incremental with read-only credentials: %d revisions since %s, want 20 since the full backup's seq", l.Revisions, l.Since)
	}
	if l := arLs(t, bin, full).db(t, "ro"); l.Revisions != 202 { // 200 + att + the read-only design doc
		t.Errorf("full: %d revisions, want 202", l.Revisions)
	}
}

// TestBackup_Selection: a server backup holds every database, _users and
// _replicator included, _global_changes never; --include/--exclude select;
// a database URL backs up that one database.
func TestBackup_Selection(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	for _, db := range []string{"app-1", "app-2", "logs", "_global_changes"} {
		arCreate(t, srv, db, true, arSmallDocs("x", 3)...)
	}
	if err := srv.Client().CreateUser(t.Context(), "ann", "pw"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"server", []string{srv.URL}, []string{"_replicator", "_users", "app-1", "app-2", "logs"}},
		{"include", []string{srv.URL, "--include", "app-*"}, []string{"app-1", "app-2"}},
		{"include+exclude", []string{srv.URL, "--include", "app-*", "--include", "logs", "--exclude", "app-2"}, []string{"app-1", "logs"}},
		{"exclude system", []string{srv.URL, "--exclude", "_*"}, []string{"app-1", "app-2", "logs"}},
		{"database URL", []string{srv.DBURL("logs")}, []string{"logs"}},
		{"explicit _global_changes URL", []string{srv.DBURL("_global_changes")}, []string{"_global_changes"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".sofa")
			args := append([]string{"backup", tc.args[0], path, "--json"}, tc.args[1:]...)
			r := arSofa(t, bin, nil, args...)
			r.want(t, exitOK)
			if s := r.summary(t); s.DBsOK != len(tc.want) {
				t.Errorf("summary: %d ok, want %d", s.DBsOK, len(tc.want))
			}
			// the document names the archive written (a script records it)
			var doc struct {
				Archive *struct {
					Location string `json:"location"`
					Bytes    int64  `json:"bytes"`
				} `json:"archive"`
			}
			fi, serr := os.Stat(path)
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || serr != nil || doc.Archive == nil || doc.Archive.Location != path || doc.Archive.Bytes != fi.Size() {
				t.Errorf("--json archive %+v (%v, %v), want %s", doc.Archive, err, serr, path)
			}
			l := arLs(t, bin, path)
			if got := l.names(); !slices.Equal(got, tc.want) {
				t.Errorf("case %d: archive holds %v, want %v", i, got, tc.want)
			}
			if slices.Contains(tc.want, "_users") {
				// ann only: _design/_auth is the server's own (PouchDB
				// Server has one, CouchDB 3.5 none) and never copied.
				if u := l.db(t, "_users"); u.Revisions != 1 {
					t.Errorf("_users: %d revisions, want 1 (ann)", u.Revisions)
				}
			}
		})
	}
	// A filter that keeps nothing is an error, and leaves no file.
	path := filepath.Join(dir, "none.sofa")
	r := arSofa(t, bin, nil, "backup", srv.URL, path, "--include", "nothing-*")
	if r.code == exitOK {
		t.Fatal("backup of no database succeeded")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a failed backup left an archive")
	}
	// A missing database is a fatal error naming it, and leaves no file.
	r = arSofa(t, bin, nil, "backup", srv.DBURL("missing"), path)
	r.want(t, exitFatal)
	if _, err := os.Stat(path); err == nil {
		t.Error("a failed backup left an archive")
	}
	arNoTemps(t, dir)
}

// arNoTemps fails when dir holds a leftover temporary archive.
func arNoTemps(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

// TestBackup_FileSafety: an existing archive is never overwritten without
// --force; --force replaces it, and never a file that is not an archive;
// no temporary file remains; a backup killed
// with SIGKILL leaves nothing under the final name.
func TestBackup_FileSafety(t *testing.T) {
	bin := sofaBin(t)
	srv := couchtest.Start(t)
	arCreate(t, srv, "db", true, arSmallDocs("d", 2000)...)
	dir := t.TempDir()
	path := filepath.Join(dir, "db.sofa")
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := arSofa(t, bin, nil, "backup", srv.DBURL("db"), path)
	r.want(t, exitUsage)
	if l := r.errLine(t); !strings.Contains(l, "--force") {
		t.Errorf("refusal does not mention --force: %q", l)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("existing file changed without --force")
	}
	// --force replaces archives only: a file that is not one stays.
	r = arSofa(t, bin, nil, "backup", srv.DBURL("db"), path, "--force")
	r.want(t, exitUsage)
	if l := r.errLine(t); !strings.Contains(l, "not a sofa archive") {
		t.Errorf("refusal to replace a file that is not an archive: %q", l)
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Fatal("--force replaced a file that is not an archive")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	arSofa(t, bin, nil, "backup", srv.DBURL("db"), path, "-q").want(t, exitOK)
	arCreate(t, srv, "other", true, arSmallDocs("o", 3)...)
	arSofa(t, bin, nil, "backup", srv.DBURL("other"), path, "--force", "-q").want(t, exitOK)
	if l := arLs(t, bin, path); l.db(t, "other").Revisions != 3 {
		t.Errorf("forced archive: %+v", l.db(t, "other"))
	}
	arNoTemps(t, dir)

	// SIGKILL mid-run: the proxy slows every _changes page and _bulk_get
	// so the run lasts.
	px := faultproxy.StartT(t, srv.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "slow", Path: `/_(bulk_get|changes)$`, Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	killed := filepath.Join(dir, "killed.sofa")
	cmd := exec.Command(bin, "backup", px.URL+"/db", killed, "-q", "--fetch-batch", "50", "--batch-size", "50", "--changes-page", "50")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for px.Rule("slow").Fired < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if px.Rule("slow").Fired < 3 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("backup did not get going: %s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("backup ended before the kill (%v): %s", cmd.ProcessState, stderr.String())
	}
	if _, err := os.Stat(killed); err == nil {
		t.Fatal("a killed backup left a file under the final name")
	}
	// The same command then succeeds.
	px.SetRules()
	arSofa(t, bin, nil, "backup", px.URL+"/db", killed, "-q").want(t, exitOK)
	if l := arLs(t, bin, killed); l.db(t, "db").Revisions != 2000 {
		t.Errorf("archive after the kill: %+v", l.db(t, "db"))
	}
}

// TestBackup_Incremental (point 4): an incremental archive holds only what
// changed (counted with `sofa ls --json`); a database deleted and recreated
// in between is stored in full, a new one too; an unchanged one holds
// nothing; `sofa restore full inc1 inc2` equals the source at inc2 time;
// archives that do not form a chain are refused before anything is
// written. Conformance case A5 rides along: a body-only change of a
// document with a large attachment.
func TestBackup_Incremental(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	c := src.Client()
	ctx := t.Context()
	arCreate(t, src, "keep", true, arSmallDocs("k", 100)...)
	arCreate(t, src, "gone", true, arSmallDocs("g", 30)...)
	arCreate(t, src, "still", true, arSmallDocs("s", 10)...)
	big := arRandom(1 << 20)
	if err := c.CreateDB(ctx, "a5"); err != nil {
		t.Fatal(err)
	}
	rev, err := c.PutAttachment(ctx, "a5", "big", "", "big.bin", "application/octet-stream", big)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	full, inc1, inc2 := filepath.Join(dir, "full.sofa"), filepath.Join(dir, "inc1.sofa"), filepath.Join(dir, "inc2.sofa")
	arSofa(t, bin, nil, "backup", src.URL, full, "-q", "--exclude", "_*").want(t, exitOK)

	// changes for inc1: keep gets 10 updates, 5 deletions, 5 new docs;
	// gone is deleted and recreated; a5 gets a body-only revision 2.
	var upd []json.RawMessage
	for i := range 15 {
		var d map[string]any
		if err := c.GetJSON(ctx, fmt.Sprintf("/keep/k%05d", i), &d); err != nil {
			t.Fatal(err)
		}
		d["updated"] = true
		if i >= 10 {
			d["_deleted"] = true
		}
		b, _ := json.Marshal(d)
		upd = append(upd, b)
	}
	upd = append(upd, arSmallDocs("new", 5)...)
	arWrite(t, src, "keep", true, upd...)
	arRecreate(t, src, "gone")
	arWrite(t, src, "gone", true, arSmallDocs("h", 7)...)
	var a5doc map[string]any
	if err := c.GetJSON(ctx, "/a5/big", &a5doc); err != nil {
		t.Fatal(err)
	}
	a5doc["note"] = "body only"
	if _, err := c.PutDoc(ctx, "a5", "big", a5doc); err != nil {
		t.Fatal(err)
	}
	_ = rev
	arSofa(t, bin, nil, "backup", src.URL, inc1, "-q", "--exclude", "_*", "--since", full).want(t, exitOK)

	// changes for inc2: a new database, 3 more docs in keep.
	arCreate(t, src, "late", true, arSmallDocs("l", 4)...)
	arWrite(t, src, "keep", true, arSmallDocs("more", 3)...)
	arSofa(t, bin, nil, "backup", src.URL, inc2, "-q", "--exclude", "_*", "--since", inc1).want(t, exitOK)

	lf, l1, l2 := arLs(t, bin, full), arLs(t, bin, inc1), arLs(t, bin, inc2)
	if l1.Header.Since == nil || l1.Header.Since.ArchiveID != lf.Header.ID || l2.Header.Since == nil || l2.Header.Since.ArchiveID != l1.Header.ID {
		t.Fatalf("chain links: full %s, inc1 %+v, inc2 %+v", lf.Header.ID, l1.Header.Since, l2.Header.Since)
	}
	check := func(l lsJSON, label, db string, revs int64, incremental bool) {
		t.Helper()
		d := l.db(t, db)
		if d.Revisions != revs {
			t.Errorf("%s %s: %d revisions, want %d", label, db, d.Revisions, revs)
		}
		if got := len(d.Since) > 0; got != incremental {
			t.Errorf("%s %s: since %q, want incremental=%v", label, db, d.Since, incremental)
		}
	}
	check(lf, "full", "keep", 100, false)
	check(l1, "inc1", "keep", 20, true)
	check(l1, "inc1", "gone", 7, false) // recreated: in full
	check(l1, "inc1", "still", 0, true)
	check(l1, "inc1", "a5", 1, true)
	check(l2, "inc2", "keep", 3, true)
	check(l2, "inc2", "gone", 0, true)
	check(l2, "inc2", "late", 4, false)
	check(l2, "inc2", "a5", 0, true)
	if d := l1.db(t, "keep"); d.Tombstones != 5 {
		t.Errorf("inc1 keep: %d tombstones, want 5", d.Tombstones)
	}
	if d := l1.db(t, "a5"); d.BlobBytes >= int64(len(big)) {
		t.Logf("note: inc1 stores the unchanged 1 MiB attachment of a5 again (%d blob bytes): archives are self-contained", d.BlobBytes)
	}

	// An incremental archive alone is not compared with a database: it
	// holds only the changes (exit 2, a message saying why); its checksums
	// are still checked.
	r := arSofa(t, bin, nil, "verify", inc1, src.URL)
	r.want(t, exitUsage)
	if l := r.errLine(t); !strings.Contains(l, "incremental") {
		t.Errorf("verify of an incremental against a server: message %q", l)
	}
	arSofa(t, bin, nil, "verify", inc1).want(t, exitOK)

	// --since an archive of another server is refused (exit 2, no file).
	other := couchtest.Start(t)
	arCreate(t, other, "keep", true, arSmallDocs("o", 3)...)
	wrong := filepath.Join(dir, "wrong.sofa")
	r = arSofa(t, bin, nil, "backup", other.URL, wrong, "-q", "--since", full)
	r.want(t, exitUsage)
	if l := r.errLine(t); !strings.Contains(l, "another server") || (other.AdminPassword != "" && strings.Contains(l, other.AdminPassword)) {
		t.Errorf("--since from another server: message %q", l)
	}
	if _, err := os.Stat(wrong); err == nil {
		t.Error("a refused incremental backup left a file")
	}

	// refused chains: nothing is created on the target
	tgt := couchtest.Start(t)
	for _, bad := range [][]string{{inc1, full}, {full, inc2}, {inc1}, {full, inc2, inc1}, {full, full}} {
		args := append(append([]string{"restore"}, bad...), tgt.URL)
		r := arSofa(t, bin, nil, args...)
		if r.code == exitOK {
			t.Fatalf("restore %v succeeded", bad)
		}
		if l := r.errLine(t); !strings.Contains(l, "chain") {
			t.Errorf("restore %v: message %q does not mention the chain", bad, l)
		}
	}
	for _, db := range []string{"keep", "gone", "still", "a5", "late"} {
		if arDBExists(t, tgt, db) {
			t.Fatalf("a refused restore created %s", db)
		}
	}

	r = arSofa(t, bin, nil, "restore", full, inc1, inc2, tgt.URL, "--json")
	r.want(t, exitOK)
	for _, db := range []string{"keep", "gone", "still", "a5", "late"} {
		arEqual(t, src, db, tgt, db)
	}
	// The summary counts each database once, whatever the archives
	// holding it; keep's revisions add up over the chain (100 + 20 + 3).
	var sum fleet.Summary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.DBsTotal != 5 || sum.DBsOK != 5 || len(sum.DBs) != 5 {
		t.Errorf("chain summary: %d databases (%d ok, %d results), want 5", sum.DBsTotal, sum.DBsOK, len(sum.DBs))
	}
	for _, d := range sum.DBs {
		if d.Name == "keep" && d.DocsWritten != 123 {
			t.Errorf("keep: docs_written %d over the chain, want 123", d.DocsWritten)
		}
	}
}

// TestBackup_RecreatedGrownPouchDB: on PouchDB Server every database
// reports the server's instance_start_time, so a database deleted and
// recreated with more updates than the seq reached before looks like the
// same one by seq alone. The checkpoint's anchor revision (the source's
// first change) is gone from the new database, so the engine starts over
// and the archive stores it in full.
func TestBackup_RecreatedGrownPouchDB(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "re", true, arSmallDocs("old", 10)...)
	dir := t.TempDir()
	full, inc := filepath.Join(dir, "full.sofa"), filepath.Join(dir, "inc.sofa")
	arSofa(t, bin, nil, "backup", src.DBURL("re"), full, "-q").want(t, exitOK)
	if err := src.Client().DeleteDB(t.Context(), "re"); err != nil {
		t.Fatal(err)
	}
	arCreate(t, src, "re", true, arSmallDocs("new", 15)...)
	arSofa(t, bin, nil, "backup", src.DBURL("re"), inc, "-q", "--since", full).want(t, exitOK)
	if d := arLs(t, bin, inc).db(t, "re"); d.Revisions != 15 || len(d.Since) != 0 {
		t.Errorf("recreated database: %d revisions since %q, want 15 in a full backup of it", d.Revisions, d.Since)
	}
}

// TestBackup_FailedDatabaseMarked: a database whose backup fails part way
// is kept in the archive marked incomplete (exit 3, `sofa ls` says so),
// and a restore of it reports it failed, never ok.
func TestBackup_FailedDatabaseMarked(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "fine", true, arSmallDocs("f", 20)...)
	arCreate(t, src, "broken", true, arSmallDocs("b", 20)...)
	px := faultproxy.StartT(t, src.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "down", Path: `^/broken/_(bulk_get|changes)$`, Fault: faultproxy.Status, Status: 500}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "part.sofa")
	r := arSofa(t, bin, nil, "backup", px.URL, path, "--json", "--exclude", "_*", "--retry-time", "1s")
	r.want(t, exitPartial)
	s := r.summary(t)
	if s.DBsOK != 1 || s.DBsFailed != 1 {
		t.Errorf("backup summary: %d ok, %d failed, want 1 and 1", s.DBsOK, s.DBsFailed)
	}
	l := arLs(t, bin, path)
	if d := l.db(t, "broken"); d.Error == "" {
		t.Errorf("broken is not marked incomplete: %+v", d)
	}
	if d := l.db(t, "fine"); d.Error != "" || d.Revisions != 20 {
		t.Errorf("fine: %+v", d)
	}
	ls := arSofa(t, bin, nil, "ls", path)
	if !strings.Contains(ls.stdout, "broken (INCOMPLETE)") || !strings.Contains(ls.stdout, "\nINCOMPLETE broken: ") {
		t.Errorf("ls does not flag the incomplete database, with its reason after the table:\n%s", ls.stdout)
	}
	for _, l := range strings.Split(ls.stdout, "\n") {
		// the reason, in the table, padded every row to its width
		if i := strings.Index(l, "fine"); i > len("broken (INCOMPLETE)") {
			t.Errorf("row %q is padded to the incomplete database's reason", l)
		}
	}
	// verify of a chain says each archive's state once (the worst is
	// the last line; a new user saw it twice)
	inc := filepath.Join(filepath.Dir(path), "inc.sofa")
	arSofa(t, bin, nil, "backup", px.URL, inc, "--since", path, "--exclude", "_*", "--retry-time", "1s", "-q").want(t, exitPartial)
	r = arSofa(t, bin, nil, "verify", path, inc)
	r.want(t, exitPartial)
	for _, a := range []string{path, inc} {
		if n := strings.Count(r.stderr, "archive "+a+" is intact but incomplete"); n != 1 {
			t.Errorf("verify of the chain says %s is incomplete %d times, want once:\n%s", a, n, r.stderr)
		}
	}
	tgt := couchtest.Start(t)
	r = arSofa(t, bin, nil, "restore", path, tgt.URL, "--json")
	r.want(t, exitPartial)
	for _, d := range r.summary(t).DBs {
		if want := d.Name == "fine"; (d.Status == "ok") != want {
			t.Errorf("restore %s: %s %s", d.Name, d.Status, d.Error)
		}
	}
	arEqual(t, src, "fine", tgt, "fine")
}

// C4 for archives: a proxy that resets connections and delays answers
// past the attempt timeout. Per-request timeouts and retries carry the
// backup through; the archive is verifiable and, restored into a fresh
// server, equal to the source by the test's own oracle.
//
// The faults fire for certain: the rules fire on fixed requests (After,
// Times) of each kind the backup sends, and the test fails if one did
// not (a fault rate of 1% over the ~25 requests of this backup would
// usually fire none).
func TestBackup_C4_ResetsAndDelays(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "c4", true, arSmallDocs("c4", 1500)...)
	var hist []json.RawMessage
	for i := 0; i < 30; i++ { // generation-2 revisions go through _bulk_get
		hist = append(hist, arRaw(`{"_id":"h%02d","_rev":"2-b%02d","_revisions":{"start":2,"ids":["b%02d","a%02d"]},"v":%d}`, i, i, i, i, i))
	}
	arWrite(t, src, "c4", false, hist...)
	px := faultproxy.StartT(t, src.URL)
	if err := px.SetRules(
		// the 3rd and 7th pages of the changes feed: one connection reset,
		// one answer held past the 1 s request timeout
		faultproxy.Rule{Name: "reset-changes", Method: "GET", Path: "/c4/_changes$", Fault: faultproxy.Reset, After: 2, Times: 1},
		faultproxy.Rule{Name: "slow-changes", Method: "GET", Path: "/c4/_changes$", Delay: 3 * time.Second, After: 6, Times: 1},
		// the first _bulk_get is reset, the second held too long
		faultproxy.Rule{Name: "reset-bulk-get", Method: "POST", Path: "/c4/_bulk_get$", Fault: faultproxy.Reset, Times: 1},
		faultproxy.Rule{Name: "slow-bulk-get", Method: "POST", Path: "/c4/_bulk_get$", Delay: 3 * time.Second, Times: 1},
	); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c4.sofa")
	arSofa(t, bin, nil, "backup", px.URL+"/c4", path, "-q", "--request-timeout", "1s",
		"--batch-size", "50", "--fetch-batch", "10", "--changes-page", "100").want(t, exitOK)
	st := px.Stats()
	t.Logf("proxy: %d requests, %d faults, rules %+v", st.Requests, st.Faults, st.Rules)
	for _, name := range []string{"reset-changes", "slow-changes", "reset-bulk-get", "slow-bulk-get"} {
		if st.Rules[name].Fired != 1 {
			t.Errorf("rule %s fired %d times, want 1: the backup did not meet that fault", name, st.Rules[name].Fired)
		}
	}
	if st.Faults < 2 {
		t.Errorf("proxy counted %d faults, want the two resets at least", st.Faults)
	}
	arSofa(t, bin, nil, "verify", path).want(t, exitOK)
	tgt := couchtest.Start(t)
	arSofa(t, bin, nil, "restore", path, tgt.DBURL("c4"), "-q").want(t, exitOK)
	couchtest.AssertEqual(t, src.DBURL("c4"), tgt.DBURL("c4"), couchtest.CompareOptions{PouchDBRevpos: true})
}
