package sofa_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
	"github.com/sofadb/sofa/storage"
)

// renameDBs creates, on srv, each of names holding three documents of
// its own (ids prefixed with the name).
func renameDBs(t *testing.T, srv *couchtest.Server, names ...string) {
	t.Helper()
	c := srv.Client()
	for _, n := range names {
		if err := c.CreateDB(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		var docs []json.RawMessage
		for i := range 3 {
			docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":%q,"db":%q}`, fmt.Sprintf("%s-%d", n, i), n)))
		}
		if _, err := c.BulkDocs(t.Context(), n, true, docs...); err != nil {
			t.Fatal(err)
		}
	}
}

// wantClash fails t unless err is an *OptionError naming every one of
// names (the source databases and the target name).
func wantClash(t *testing.T, what string, err error, names ...string) {
	t.Helper()
	var oe *sofa.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("%s: %v, want an *OptionError", what, err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", n)) {
			t.Errorf("%s: %q does not name %q", what, err, n)
		}
	}
}

// writes are the requests of a recording that may change the target
// (any but GET and HEAD).
func writes(p *recproxy.Proxy) []string {
	var out []string
	for _, e := range p.Exchanges() {
		if e.Method != "GET" && e.Method != "HEAD" {
			out = append(out, e.Method+" "+e.Path)
		}
	}
	return out
}

// TestRestore_RenameClashRefused: two selected databases restored into
// one target database are refused with an *OptionError naming both and
// the target, before anything is written: two renames to one name (with
// ReuseExisting too), a rename onto a selected database kept under its
// own name, into a server and into an archive, from an archive read at
// offsets or in order. Renames that swap two names are no clash.
func TestRestore_RenameClashRefused(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	renameDBs(t, src, "a$b", "conf", "other")
	path := filepath.Join(t.TempDir(), "full.sofa")
	ar, err := sofa.Open(ctx, path, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srcEP, err := sofa.Open(ctx, src.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := sofa.Backup(ctx, srcEP, ar, sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"a$b", "conf", "other"}}}); err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}

	tgt := couchtest.Start(t)
	// The target holds conf, restored: a clash must leave it as it is.
	renameDBs(t, tgt, "conf")
	couchtest.AssertEqual(t, src.DBURL("conf"), tgt.DBURL("conf"))
	rec := recproxy.Start(t, tgt.URL)
	dst, err := sofa.Open(ctx, rec.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	both := sofa.Selection{Include: []string{"a$b", "conf"}}
	for _, c := range []struct {
		name  string
		o     sofa.RestoreOptions
		names []string
	}{
		{"two renames to one name", sofa.RestoreOptions{Selection: both, Renames: map[string]string{"a$b": "foo", "conf": "foo"}, ReuseExisting: true}, []string{"a$b", "conf", "foo"}},
		{"two renames, every database selected", sofa.RestoreOptions{Renames: map[string]string{"a$b": "foo", "conf": "foo"}}, []string{"a$b", "conf", "foo"}},
		{"a rename onto a selected name", sofa.RestoreOptions{Renames: map[string]string{"a$b": "conf"}, ReuseExisting: true}, []string{"a$b", "conf"}},
		{"a rename onto a selected name, renamed onward", sofa.RestoreOptions{Renames: map[string]string{"a$b": "conf", "conf": "other"}, ReuseExisting: true}, []string{"conf", "other"}},
	} {
		rec.Reset()
		_, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, c.o)
		wantClash(t, c.name, err, c.names...)
		if w := writes(rec); len(w) > 0 {
			t.Errorf("%s: the target was written: %v", c.name, w)
		}
		out, err := sofa.Open(ctx, filepath.Join(t.TempDir(), "out.sofa"), sofa.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o := c.o
		o.ReuseExisting = false
		_, err = sofa.Restore(ctx, []*sofa.Endpoint{ar}, out, o)
		wantClash(t, c.name+", into an archive", err, c.names...)
		if _, err := (storage.Local{}).Stat(ctx, out.Archive()); err == nil {
			t.Errorf("%s: the archive %s was written", c.name, out.Archive())
		}
	}
	couchtest.AssertEqual(t, src.DBURL("conf"), tgt.DBURL("conf"))
	if dbExists(t, tgt, "foo") {
		t.Errorf("foo was created")
	}

	// Swapped names are no clash: each database restored into the
	// other's name.
	tgt2 := couchtest.Start(t)
	dst2, err := sofa.Open(ctx, tgt2.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst2, sofa.RestoreOptions{Selection: both, Renames: map[string]string{"a$b": "conf", "conf": "a$b"}})
	if err != nil || !sum.Complete() || sum.DBsTotal != 2 {
		t.Fatalf("swapped names: %+v, %v", sum, err)
	}
	couchtest.AssertEqual(t, src.DBURL("a$b"), tgt2.DBURL("conf"))
	couchtest.AssertEqual(t, src.DBURL("conf"), tgt2.DBURL("a$b"))

	// An archive that can only be read in order is checked up front too
	// (its manifest read first): nothing is written.
	st := &inOrderStore{}
	once := backupNamed(t, src, st, "once.sofa", "a$b", "conf")
	tgt3 := couchtest.Start(t)
	dst3, err := sofa.Open(ctx, tgt3.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sofa.Restore(ctx, []*sofa.Endpoint{once}, dst3, sofa.RestoreOptions{Renames: map[string]string{"a$b": "conf"}})
	wantClash(t, "read in order", err, "a$b", "conf")
	if dbExists(t, tgt3, "conf") || dbExists(t, tgt3, "a$b") {
		t.Errorf("read in order: a database was created")
	}
}

// backupNamed backs up the databases names of srv into the archive name
// of st.
func backupNamed(t *testing.T, srv *couchtest.Server, st storage.Store, name string, names ...string) *sofa.Endpoint {
	t.Helper()
	ctx := t.Context()
	src, err := sofa.Open(ctx, srv.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := sofa.Open(ctx, name, sofa.OpenOptions{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := sofa.Backup(ctx, src, ar, sofa.BackupOptions{Selection: sofa.Selection{Include: names}})
	if err != nil || !sum.Complete() {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	return ar
}

// dbExists reports whether srv holds the database db.
func dbExists(t *testing.T, srv *couchtest.Server, db string) bool {
	t.Helper()
	var names []string
	if err := srv.Client().GetJSON(t.Context(), "/_all_dbs", &names); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == db {
			return true
		}
	}
	return false
}

// TestStoredAlikeRefused: PouchDB Server keeps "a/b" as "ab", so a
// whole-server copy or restore of both from CouchDB into it would merge
// them: both are refused with an *OptionError naming the two databases,
// before anything is written; the same copy of each alone works.
func TestStoredAlikeRefused(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "the source holds both a/b and ab, which PouchDB Server cannot")
	ctx := t.Context()
	src := couchtest.Start(t)
	renameDBs(t, src, "a/b", "ab")
	ar := backupNamed(t, src, storage.Local{}, filepath.Join(t.TempDir(), "ab.sofa"), "a/b", "ab")
	srcEP, err := sofa.Open(ctx, src.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tgt := couchtest.StartKind(t, couchtest.PouchDB)
	rec := recproxy.Start(t, tgt.URL)
	dst, err := sofa.Open(ctx, rec.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sofa.Copy(ctx, srcEP, dst, sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"a/b", "ab"}}})
	wantClash(t, "copy", err, "a/b", "ab")
	_, err = sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{})
	wantClash(t, "restore", err, "a/b", "ab")
	if w := writes(rec); len(w) > 0 {
		t.Errorf("the target was written: %v", w)
	}
	sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{Renames: map[string]string{"a/b": "a-b"}})
	if err != nil || !sum.Complete() || sum.DBsTotal != 2 {
		t.Fatalf("restore with a/b renamed: %+v, %v", sum, err)
	}
	couchtest.AssertEqual(t, src.DBURL("a/b"), tgt.DBURL("a-b"), couchtest.CompareOptions{PouchDBRevpos: true})
	couchtest.AssertEqual(t, src.DBURL("ab"), tgt.DBURL("ab"), couchtest.CompareOptions{PouchDBRevpos: true})
}
