package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// otherKind is the kind of server this run does not test on: a copy
// between vendors goes from the run's kind to the other one, so the two
// runs cover both directions.
func otherKind(k couchtest.Kind) couchtest.Kind {
	if k == couchtest.CouchDB {
		return couchtest.PouchDB
	}
	return couchtest.CouchDB
}

// usersAuth reads _users/_design/_auth with its conflicts; ok is false
// when the server has none.
func usersAuth(t *testing.T, srv *couchtest.Server) (rev string, conflicts []string, ok bool) {
	t.Helper()
	var d struct {
		Rev       string   `json:"_rev"`
		Conflicts []string `json:"_conflicts"`
	}
	st, err := srv.Client().Do(t.Context(), "GET", "/_users/_design/_auth?conflicts=true", nil, &d)
	if st == 404 {
		return "", nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return d.Rev, d.Conflicts, true
}

// TestRestore_SystemDBsAcrossVendors restores a server backup into a
// server of the other vendor: _users holds the user, the target keeps its
// own _design/_auth (no conflict, no foreign one added), and a
// `_users/_security` the target refuses (CouchDB never lets it be edited)
// is a warning, not a failure.
func TestRestore_SystemDBsAcrossVendors(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "app", true, arSmallDocs("x", 3)...)
	if err := src.Client().CreateUser(t.Context(), "ann", "pw"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "server.sofa")
	arSofa(t, bin, nil, "backup", src.URL, path, "-q").want(t, exitOK)

	tgt := couchtest.StartKind(t, otherKind(src.Kind))
	authRev, _, hadAuth := usersAuth(t, tgt)
	r := arSofa(t, bin, nil, "restore", path, tgt.URL, "--json")
	r.want(t, exitOK)
	s := r.summary(t)
	for _, d := range s.DBs {
		if d.Name != "_users" {
			continue
		}
		refused := false
		for _, w := range d.Warnings {
			refused = refused || strings.Contains(w, "_users/_security")
		}
		if tgt.Kind == couchtest.CouchDB && src.Kind == couchtest.PouchDB && !refused {
			t.Errorf("_users restored into CouchDB: no warning about _security (%q)", d.Warnings)
		}
	}
	var ann map[string]any
	if err := tgt.Client().GetJSON(t.Context(), "/_users/org.couchdb.user:ann", &ann); err != nil {
		t.Fatalf("ann not restored: %v", err)
	}
	rev, conflicts, has := usersAuth(t, tgt)
	switch {
	case has != hadAuth:
		t.Errorf("target _design/_auth: present %v after the restore, %v before", has, hadAuth)
	case has && (rev != authRev || len(conflicts) > 0):
		t.Errorf("target _design/_auth: rev %s conflicts %v, want its own %s alone", rev, conflicts, authRev)
	}
	arEqual(t, src, "app", tgt, "app")

	// The copy agrees with the archive: the target's own _design/_auth,
	// and a _replicator it created itself holding nothing of the user's,
	// are not differences.
	r = arSofa(t, bin, nil, "verify", "--full", path, tgt.URL, "--json")
	r.want(t, exitOK)
}

// TestCounts_NoDelCountIsNotZero: PouchDB Server reports no
// doc_del_count. A copy into it of a database with a deleted document,
// and verify between the two, compare what both sides report (live
// documents) and succeed.
func TestCounts_NoDelCountIsNotZero(t *testing.T) {
	bin := sofaBin(t)
	src := couchtest.Start(t)
	arCreate(t, src, "dels", true, arSmallDocs("x", 3)...)
	var doc struct {
		Rev string `json:"_rev"`
	}
	c := src.Client()
	if err := c.GetJSON(t.Context(), "/dels/x00000", &doc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(t.Context(), "DELETE", "/dels/x00000?rev="+doc.Rev, nil, nil); err != nil {
		t.Fatal(err)
	}
	pouch := couchtest.StartKind(t, couchtest.PouchDB)
	arSofa(t, bin, nil, "replicate", src.URL, pouch.URL, "-q", "--verify", "cheap").want(t, exitOK)
	arSofa(t, bin, nil, "replicate", src.URL, pouch.URL, "-q", "--verify", "full").want(t, exitOK)
	arSofa(t, bin, nil, "verify", src.DBURL("dels"), pouch.DBURL("dels"), "-q").want(t, exitOK)
	arSofa(t, bin, nil, "verify", "--full", pouch.DBURL("dels"), src.DBURL("dels"), "-q").want(t, exitOK)
	// A real difference in live documents is still one.
	if _, err := c.PutDoc(t.Context(), "dels", "extra", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	arSofa(t, bin, nil, "verify", src.DBURL("dels"), pouch.DBURL("dels"), "-q").want(t, exitDifferent)
}

// A restore or copy of _users into a server that holds another revision
// of a user's document leaves that document with conflicts, which makes
// CouchDB refuse the user's login: the database is still ok (both
// revisions are kept, as replication does), with a warning naming the
// user documents; a user only the target has, or one the source created,
// is not named.
func TestUsers_ConflictsWarned(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB refuses the login of a user whose document has conflicts")
	bin := sofaBin(t)
	src := couchtest.Start(t)
	for _, u := range []string{"carol", "ann"} {
		if err := src.Client().CreateUser(t.Context(), u, "source-pw"); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "users.sofa")
	arSofa(t, bin, nil, "backup", src.URL, path, "--include", "_users", "-q").want(t, exitOK)
	for _, run := range []struct {
		name string
		args func(tgt *couchtest.Server) []string
	}{
		{"restore", func(tgt *couchtest.Server) []string { return []string{"restore", path, tgt.URL, "--json"} }},
		{"replicate", func(tgt *couchtest.Server) []string {
			return []string{"replicate", src.URL, tgt.URL, "--with-users", "--include", "_users", "--json"}
		}},
	} {
		t.Run(run.name, func(t *testing.T) {
			tgt := couchtest.Start(t)
			for _, u := range []string{"carol", "dave"} {
				if err := tgt.Client().CreateUser(t.Context(), u, "target-pw"); err != nil {
					t.Fatal(err)
				}
			}
			r := arSofa(t, bin, nil, run.args(tgt)...)
			r.want(t, exitOK)
			var warned []string
			for _, d := range r.summary(t).DBs {
				if d.Name == "_users" {
					warned = d.Warnings
				}
			}
			w := strings.Join(warned, "\n")
			if !strings.Contains(w, "1 user document now has conflicts") || !strings.Contains(w, "org.couchdb.user:carol") ||
				strings.Contains(w, "org.couchdb.user:ann") || strings.Contains(w, "org.couchdb.user:dave") {
				t.Errorf("_users warnings %q: want one naming org.couchdb.user:carol alone", warned)
			}
		})
	}
}
