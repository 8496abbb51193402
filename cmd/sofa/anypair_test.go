package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/s3test"
)

// The pairs of endpoints beyond server <-> archive through the CLI:
// `sofa backup OLD.sofa NEW.sofa` and `sofa restore FULL INC NEW.sofa`.

// anypairSource creates, on a new server, two databases with small
// documents, a conflict, a tombstone, a 100 KiB attachment and
// `_security`.
func anypairSource(t *testing.T) *couchtest.Server {
	t.Helper()
	src := couchtest.Start(t)
	arCreate(t, src, "orders", true, append(arSmallDocs("o", 40),
		arRaw(`{"_id":"big","_attachments":{"b.bin":{"content_type":"application/octet-stream","data":%q}}}`, b64s(arRandom(100<<10))),
		arRaw(`{"_id":"gone","_deleted":true}`))...)
	arWrite(t, src, "orders", false,
		arRaw(`{"_id":"c","_rev":"2-aa","_revisions":{"start":2,"ids":["aa","root"]}}`),
		arRaw(`{"_id":"c","_rev":"2-bb","_revisions":{"start":2,"ids":["bb","root"]}}`))
	if err := src.Client().PutSecurity(t.Context(), "orders", couchtest.Security{Members: couchtest.Group{Roles: []string{"staff"}}}); err != nil {
		t.Fatal(err)
	}
	arCreate(t, src, "users-x", true, arSmallDocs("u", 10)...)
	return src
}

// TestCLI_BackupFromArchive: `sofa backup a.sofa b.sofa` (and with
// --include, and from stdin) copies the archive into a new one whose
// restore equals the source; --since and --shard with an archive SOURCE
// are usage errors (exit 2, one line), and so are the same archive and
// replicate with an archive on either side.
func TestCLI_BackupFromArchive(t *testing.T) {
	bin := sofaBin(t)
	src := anypairSource(t)
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.sofa"), filepath.Join(dir, "b.sofa"), filepath.Join(dir, "c.sofa")
	arSofa(t, bin, nil, "backup", src.URL, a, "-q", "--exclude", "_*").want(t, exitOK)
	r := arSofa(t, bin, nil, "backup", a, b, "--json")
	r.want(t, exitOK)
	if s := r.summary(t); s.DBsOK != 2 || s.DBsTotal != 2 {
		t.Errorf("backup of the archive: %d of %d ok, want 2", s.DBsOK, s.DBsTotal)
	}
	la, lb := arLs(t, bin, a), arLs(t, bin, b)
	if lb.Header.Source != la.Header.Source || lb.Header.Since != nil {
		t.Errorf("b.sofa header %+v, a.sofa's source %q", lb.Header, la.Header.Source)
	}
	tgt := couchtest.Start(t)
	arSofa(t, bin, nil, "restore", b, tgt.URL, "-q").want(t, exitOK)
	for _, db := range []string{"orders", "users-x"} {
		arEqual(t, src, db, tgt, db)
	}

	// From stdin, one database.
	f, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arSofa(t, bin, f, "backup", "-", c, "-q", "--include", "orders").want(t, exitOK)
	if names := arLs(t, bin, c).names(); strings.Join(names, ",") != "orders" {
		t.Errorf("--include orders from stdin: %v", names)
	}

	for _, args := range [][]string{
		{"backup", a, filepath.Join(dir, "x.sofa"), "--since", b},
		{"backup", a, filepath.Join(dir, "x.sofa"), "--shard", "0/2"},
		{"backup", a, a, "--force"},
		{"replicate", a, tgt.URL},
		{"replicate", src.URL, filepath.Join(dir, "x.sofa")},
	} {
		r := arSofa(t, bin, nil, args...)
		r.want(t, exitUsage)
		if line := r.errLine(t); !strings.Contains(line, "archive") {
			t.Errorf("sofa %s: %q, want it to say why an archive SOURCE refuses it", strings.Join(args, " "), line)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.sofa")); !os.IsNotExist(err) {
		t.Errorf("a refused backup left x.sofa: %v", err)
	}
}

// TestCLI_RestoreIntoArchive: `sofa restore full inc merged.sofa`
// consolidates the chain into one full archive whose restore equals the
// source after the incremental (a database deleted between the backups
// absent); options of a server target are usage errors, and so is
// --compression with a server target.
func TestCLI_RestoreIntoArchive(t *testing.T) {
	bin := sofaBin(t)
	src := anypairSource(t)
	arCreate(t, src, "dropped", true, arSmallDocs("d", 5)...)
	dir := t.TempDir()
	full, inc, merged := filepath.Join(dir, "full.sofa"), filepath.Join(dir, "inc.sofa"), filepath.Join(dir, "merged.sofa")
	arSofa(t, bin, nil, "backup", src.URL, full, "-q", "--exclude", "_*").want(t, exitOK)
	var d map[string]any
	if err := src.Client().GetJSON(t.Context(), "/orders/o00001", &d); err != nil {
		t.Fatal(err)
	}
	d["changed"] = true
	b, _ := json.Marshal(d)
	arWrite(t, src, "orders", true, append([]json.RawMessage{b}, arSmallDocs("n", 5)...)...)
	if err := src.Client().DeleteDB(t.Context(), "dropped"); err != nil {
		t.Fatal(err)
	}
	arSofa(t, bin, nil, "backup", src.URL, inc, "-q", "--exclude", "_*", "--since", full).want(t, exitOK)

	r := arSofa(t, bin, nil, "restore", full, inc, merged, "--json", "--compression", "gzip")
	r.want(t, exitOK)
	// orders and users-x; dropped (deleted before the incremental) left out
	if s := r.summary(t); s.DBsOK != s.DBsTotal || s.DBsTotal != 2 || len(s.LeftOut) != 1 || s.LeftOut[0].Name != "dropped" {
		t.Errorf("restore into an archive: %d of %d ok, left out %+v", s.DBsOK, s.DBsTotal, s.LeftOut)
	}
	l := arLs(t, bin, merged)
	if l.Header.Since != nil || l.Header.Compression != "gzip" || strings.Join(l.names(), ",") != "orders,users-x" {
		t.Errorf("merged.sofa: header %+v, databases %v", l.Header, l.names())
	}
	tgt := couchtest.Start(t)
	arSofa(t, bin, nil, "restore", merged, tgt.URL, "-q").want(t, exitOK)
	for _, db := range []string{"orders", "users-x"} {
		arEqual(t, src, db, tgt, db)
	}
	if arDBExists(t, tgt, "dropped") {
		t.Error("merged.sofa restored a database deleted before the incremental")
	}

	x := filepath.Join(dir, "x.sofa")
	for _, args := range [][]string{
		{"restore", full, inc, x, "--replace"},
		{"restore", full, inc, x, "--q", "2"},
		{"restore", full, inc, tgt.URL, "--compression", "none"},
		{"restore", full, inc, inc, "--force"},
		{"restore", full, "127.0.0.1:5984"}, // a forgotten http://, not an archive
	} {
		r := arSofa(t, bin, nil, args...)
		r.want(t, exitUsage)
		if line := r.errLine(t); !strings.Contains(line, "archive") && !strings.Contains(line, "server") {
			t.Errorf("sofa %s: %q", strings.Join(args, " "), line)
		}
	}
	if _, err := os.Stat(x); !os.IsNotExist(err) {
		t.Errorf("a refused restore left x.sofa: %v", err)
	}
}

// TestS3_ArchiveToArchive: the same two pairs with s3:// on both sides:
// a backup of an s3:// archive into another, and a chain of s3://
// archives restored into one s3:// archive; each restored into a server
// equals the source.
func TestS3_ArchiveToArchive(t *testing.T) {
	bin := sofaBin(t)
	s3srv := s3test.Start(t)
	bucket := s3srv.Bucket(t)
	env := s3srv.Env()
	src := anypairSource(t)
	run := func(args ...string) {
		t.Helper()
		s3Sofa(t, bin, env, append(args, "-q")...).want(t, exitOK)
	}
	full, inc := "s3://"+bucket+"/full.sofa", "s3://"+bucket+"/inc.sofa"
	run("backup", src.URL, full, "--exclude", "_*")
	run("backup", full, "s3://"+bucket+"/copy.sofa")
	tgt := couchtest.Start(t)
	run("restore", "s3://"+bucket+"/copy.sofa", tgt.URL)
	for _, db := range []string{"orders", "users-x"} {
		arEqual(t, src, db, tgt, db)
	}

	arWrite(t, src, "orders", true, arSmallDocs("later", 7)...)
	run("backup", src.URL, inc, "--exclude", "_*", "--since", full)
	run("restore", full, inc, "s3://"+bucket+"/merged.sofa")
	tgt2 := couchtest.Start(t)
	run("restore", "s3://"+bucket+"/merged.sofa", tgt2.URL)
	for _, db := range []string{"orders", "users-x"} {
		arEqual(t, src, db, tgt2, db)
	}
}
