package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/faultproxy"
)

// renameArchive backs up the databases a$b, conf and other of a new
// server (20 documents each) into a new archive file, and returns the
// server and the archive's path.
func renameArchive(t *testing.T, bin string) (*couchtest.Server, string) {
	t.Helper()
	src := couchtest.Start(t)
	for _, db := range []string{"a$b", "conf", "other"} {
		arCreate(t, src, db, true, arSmallDocs(db+"-", 20)...)
	}
	path := filepath.Join(t.TempDir(), "full.sofa")
	arSofa(t, bin, nil, "backup", src.URL, path, "-q", "--include", "a$b", "--include", "conf", "--include", "other").want(t, exitOK)
	return src, path
}

// TestRestore_RenameClashExit2: two --rename to one new name (with
// --reuse-existing or not), a rename onto another selected database's
// name, and one database renamed twice are usage errors (exit 2) that
// name the databases and the target, and nothing is written. From stdin,
// read once, the first of the two is restored and the second refused
// when reached, still exit 2.
func TestRestore_RenameClashExit2(t *testing.T) {
	bin := sofaBin(t)
	src, path := renameArchive(t, bin)
	tgt := couchtest.Start(t)
	for _, c := range []struct {
		args  []string
		names []string
	}{
		{[]string{"--rename", "a$b=foo", "--rename", "conf=foo", "--include", "a$b", "--include", "conf", "--reuse-existing"}, []string{`"a$b"`, `"conf"`, `"foo"`}},
		{[]string{"--rename", "a$b=foo", "--rename", "conf=foo", "--include", "a$b", "--include", "conf"}, []string{`"a$b"`, `"conf"`, `"foo"`}},
		{[]string{"--rename", "a$b=conf"}, []string{`"a$b"`, `"conf"`}},
		{[]string{"--rename", "a$b=x", "--rename", "a$b=y"}, []string{"a$b=x", "a$b=y"}},
	} {
		r := arSofa(t, bin, nil, append([]string{"restore", path, tgt.URL}, c.args...)...)
		r.want(t, exitUsage)
		line := r.errLine(t)
		for _, n := range c.names {
			if !strings.Contains(line, n) {
				t.Errorf("%v: %q does not name %s", c.args, line, n)
			}
		}
	}
	for _, db := range []string{"foo", "conf", "a$b", "other", "x", "y"} {
		if arDBExists(t, tgt, db) {
			t.Errorf("%s was created by a refused restore", db)
		}
	}

	// From stdin: the first of a$b and conf in the archive is restored
	// into conf; the second is refused when reached, not written into it.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := arSofa(t, bin, f, "restore", "-", tgt.URL, "--rename", "a$b=conf", "-q")
	r.want(t, exitUsage)
	if line := r.errLine(t); !strings.Contains(line, `"a$b"`) || !strings.Contains(line, `"conf"`) {
		t.Errorf("stdin: %q does not name both databases", line)
	}
	var diffs []string
	for _, db := range []string{"a$b", "conf"} {
		d, err := couchtest.CompareDBs(t.Context(), src.DBURL(db), tgt.DBURL("conf"), couchtest.CompareOptions{PouchDBRevpos: true})
		if err != nil {
			t.Fatal(err)
		}
		if d.Equal() {
			diffs = nil
			break
		}
		diffs = append(diffs, db+" -> conf: "+d.String())
	}
	if diffs != nil {
		t.Errorf("stdin: conf holds neither source alone:\n%s", strings.Join(diffs, "\n"))
	}
}

// TestRestore_NothingRestoredExit1: a target that refuses to create any
// database (401, as CouchDB answers a user who is not a server admin)
// makes a restore that did nothing: exit 1, each database listed, one
// closing line with the first failure and the need for a server admin;
// with one database the same. A database already restored (up to date,
// nothing written) beside one refused is something done: exit 3.
func TestRestore_NothingRestoredExit1(t *testing.T) {
	bin := sofaBin(t)
	src, path := renameArchive(t, bin)
	tgt := couchtest.Start(t)
	px := faultproxy.StartT(t, tgt.URL)
	if err := px.SetRules(faultproxy.Rule{Name: "no admin", Method: "PUT", Path: `^/[a-z][^/]*$`, Fault: faultproxy.Status, Status: 401,
		Body: `{"error":"unauthorized","reason":"You are not a server admin."}`}); err != nil {
		t.Fatal(err)
	}
	r := arSofa(t, bin, nil, "restore", path, px.URL)
	r.want(t, exitFatal)
	for _, db := range []string{"a$b", "conf", "other"} {
		if !strings.Contains(r.stderr, `database "`+db+`": failed`) {
			t.Errorf("%s is not listed failed:\n%s", db, r.stderr)
		}
	}
	line := r.errLine(t)
	if !strings.Contains(line, "nothing was restored: all 3 databases failed") || !strings.Contains(line, "server admin") {
		t.Errorf("closing line: %q", line)
	}

	r = arSofa(t, bin, nil, "restore", path, px.URL, "--include", "conf")
	r.want(t, exitFatal)
	if line := r.errLine(t); !strings.Contains(line, `nothing was restored: database "conf" failed`) || !strings.Contains(line, "server admin") {
		t.Errorf("one database, closing line: %q", line)
	}

	arSofa(t, bin, nil, "restore", path, tgt.URL, "--include", "conf", "-q").want(t, exitOK)
	r = arSofa(t, bin, nil, "restore", path, px.URL, "--include", "conf", "--include", "other", "--json")
	r.want(t, exitPartial)
	if s := r.summary(t); s.DBsOK != 1 || s.DBsFailed != 1 || s.DocsWritten != 0 {
		t.Errorf("conf up to date, other refused: %d ok, %d failed, %d written", s.DBsOK, s.DBsFailed, s.DocsWritten)
	}
	arEqual(t, src, "conf", tgt, "conf")
	if arDBExists(t, tgt, "other") || arDBExists(t, tgt, "a$b") {
		t.Errorf("a refused database exists on the target")
	}
}
