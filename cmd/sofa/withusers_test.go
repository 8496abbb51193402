package main

import (
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestWithUsers_BesideInclude: --with-users copies (and verify compares)
// _users when --include names other databases too; it was left out
// without a word ('--include tenant-*' --with-users copied no user).
func TestWithUsers_BesideInclude(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "users log in on CouchDB")
	bin := sofaBin(t)
	src, tgt := couchtest.Start(t), couchtest.Start(t)
	if err := src.Client().CreateDB(t.Context(), "tenant-1"); err != nil {
		t.Fatal(err)
	}
	cliLoad(t, src, "tenant-1", 3)
	if err := src.Client().CreateUser(t.Context(), "alice", "pw"); err != nil {
		t.Fatal(err)
	}
	cliRun(t, bin, "replicate", src.URL, tgt.URL, "--include", "tenant-*", "--with-users", "-q").wantCode(t, exitOK)
	var user struct {
		Name string `json:"name"`
	}
	if err := tgt.Client().GetJSON(t.Context(), "/_users/org.couchdb.user:alice", &user); err != nil || user.Name != "alice" {
		t.Errorf("alice on the target after --include tenant-* --with-users: %+v, %v", user, err)
	}
	r := cliRun(t, bin, "verify", src.URL, tgt.URL, "--include", "tenant-*", "--with-users", "--json")
	r.wantCode(t, exitOK)
	if !strings.Contains(r.stdout, `"_users"`) {
		t.Errorf("verify --include tenant-* --with-users did not compare _users:\n%s", r.stdout)
	}
}
