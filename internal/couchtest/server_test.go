package couchtest

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestStartServer_StopKillsAndCleansUp(t *testing.T) {
	s, err := StartServer(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var welcome map[string]any
	if err := s.Client().GetJSON(t.Context(), "/", &welcome); err != nil {
		t.Fatal(err)
	}
	key, want := "express-pouchdb", "Welcome!"
	if s.Kind == CouchDB {
		key, want = "couchdb", "Welcome"
	}
	if got := welcome[key]; got != want {
		t.Errorf("welcome = %v, want %s %q", welcome, key, want)
	}
	if !strings.HasPrefix(s.baseURL(), "http://127.0.0.1:") {
		t.Errorf("URL = %q, want a loopback URL", s.baseURL())
	}
	if s.Version == "" {
		t.Error("Version not read from the welcome answer")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := http.Get(s.baseURL() + "/"); err == nil {
		t.Error("server still answers after Stop")
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("server dir %s not removed: %v", s.dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestServer_ErrReportsCrash(t *testing.T) {
	s, err := StartServer(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if err := s.Err(); err != nil {
		t.Fatalf("Err on a running server: %v", err)
	}
	killGroup(s.cmd.Process.Pid)
	<-s.done
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "exited unexpectedly") {
		t.Errorf("Err after crash = %v, want exited unexpectedly", err)
	}
}

func TestShared_SameServer(t *testing.T) {
	a, b := Shared(t), Shared(t)
	if a != b {
		t.Fatal("Shared returned two servers")
	}
	db := a.NewDB(t)
	if err := a.Client().GetJSON(t.Context(), "/"+EscapeDB(db), nil); err != nil {
		t.Fatal(err)
	}
}

func TestStartWith_AuthEnforced(t *testing.T) {
	s := StartWith(t, Options{AdminUser: "admin", AdminPassword: "s3cret", Users: map[string]string{"reader": "rpw", "other": "opw"}})
	ctx := t.Context()
	admin := s.Client()
	db := s.NewDB(t)
	if _, err := admin.PutDoc(ctx, db, "doc1", map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := admin.MakeReadOnly(ctx, db, "reader"); err != nil {
		t.Fatal(err)
	}

	wrong := NewClient(s.UserURL("admin", "nope"))
	if err := wrong.GetJSON(ctx, "/_all_dbs", nil); StatusOf(err) != http.StatusUnauthorized {
		t.Errorf("wrong password: err = %v, want 401", err)
	}
	if strings.Contains(errString(wrong.GetJSON(ctx, "/_all_dbs", nil)), "nope") {
		t.Error("error message carries the password")
	}

	reader := NewClient(s.UserURL("reader", "rpw"))
	if err := reader.GetJSON(ctx, "/"+EscapeDB(db)+"/doc1", nil); err != nil {
		t.Errorf("member read: %v", err)
	}
	if _, err := reader.PutDoc(ctx, db, "doc2", map[string]any{}); StatusOf(err) != http.StatusForbidden {
		t.Errorf("member write on read-only db: err = %v, want 403", err)
	}
	res, err := reader.BulkDocs(ctx, db, true, []byte(`{"_id":"doc3"}`))
	if err == nil || len(res) != 1 || res[0].Error != "forbidden" {
		t.Errorf("member _bulk_docs: %v %v, want a forbidden row", res, err)
	}
	if _, err := reader.PutDoc(ctx, db, "_local/cp", map[string]any{}); err != nil {
		t.Errorf("member _local write (allowed by both servers): %v", err)
	}

	// A known user outside members: PouchDB Server answers 401, CouchDB 403.
	other := NewClient(s.UserURL("other", "opw"))
	wantOther := http.StatusUnauthorized
	if s.Kind == CouchDB {
		wantOther = http.StatusForbidden
	}
	if err := other.GetJSON(ctx, "/"+EscapeDB(db)+"/doc1", nil); StatusOf(err) != wantOther {
		t.Errorf("non-member read: err = %v, want %d", err, wantOther)
	}
	anon := NewClient(s.URL)
	if err := anon.GetJSON(ctx, "/"+EscapeDB(db)+"/doc1", nil); StatusOf(err) != http.StatusUnauthorized {
		t.Errorf("anonymous read: err = %v, want 401", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestEscapeID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a+b", "a%2Bb"},
		{"a b", "a%20b"},
		{"a%2Bb", "a%252Bb"},
		{"folder/file", "folder%2Ffile"},
		{"_design/with/slash", "_design/with%2Fslash"},
		{"_local/x", "_local/x"},
		{"é", "%C3%A9"},
		{"A-z_0.9:x", "A-z_0.9:x"},
		{"_design/", "_design%2F"},
	} {
		if got := EscapeID(tc.in); got != tc.want {
			t.Errorf("EscapeID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := EscapeDB("a/b+c$(x)"), "a%2Fb%2Bc%24%28x%29"; got != want {
		t.Errorf("EscapeDB = %q, want %q", got, want)
	}
}

func TestUniqueDBName(t *testing.T) {
	a, b := UniqueDBName(t), UniqueDBName(t)
	if a == b {
		t.Errorf("two calls gave %q", a)
	}
	if !strings.HasPrefix(a, "t-testuniquedbname-") {
		t.Errorf("name %q does not carry the test name", a)
	}
}

func TestStartServer_MissingNodeModules(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/go.mod", []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	_, err := StartServer(t.Context(), Options{Kind: PouchDB})
	if err == nil || !strings.Contains(err.Error(), "make deps") || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %v, want a one-line hint to run make deps", err)
	}
}

// TestServer_RestartKeepsDataAndPort: Restart brings the server back on
// the same URL with its databases (PouchDB Server on disk); an in-memory
// PouchDB Server refuses to restart.
func TestServer_RestartKeepsDataAndPort(t *testing.T) {
	ctx := t.Context()
	s := StartWith(t, Options{OnDisk: true})
	c := s.Client()
	if err := c.CreateDB(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "kept", "d", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	pid := s.Pid()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Pid() == pid || s.Err() != nil {
		t.Errorf("after Restart: pid %d (was %d), Err %v", s.Pid(), pid, s.Err())
	}
	var doc map[string]any
	if err := c.GetJSON(ctx, "/kept/d", &doc); err != nil || doc["v"] != float64(1) {
		t.Errorf("the document after Restart: %v, %v", doc, err)
	}
	if s.Kind == PouchDB {
		mem := StartWith(t, Options{})
		if err := mem.Restart(ctx); err == nil || !strings.Contains(err.Error(), "OnDisk") {
			t.Errorf("Restart of an in-memory PouchDB Server: %v, want a refusal naming OnDisk", err)
		}
	}
}
