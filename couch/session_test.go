package couch

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/internal/recproxy"
)

// A session the server no longer accepts (here: its secret changed, as
// after a restart with another secret) is answered 401; the client logs in
// once more and the request succeeds. A wrong password fails the login
// with an error that says so and does not hold the password.
func TestCookieAuth_Relogin(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "the session secret is a CouchDB setting")
	if os.Getenv(couchtest.EnvCouchURL) != "" {
		t.Skip("changes the server's session secret: not on a shared server")
	}
	const pw = "relogin-s3cret"
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: pw})
	p := recproxy.Start(t, srv.URL)
	ctx := t.Context()
	ep, err := Probe(ctx, p.UserURL("admin", pw), Options{Auth: AuthCookie})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Server.AuthUsed() != AuthCookie {
		t.Fatalf("auth used %s, want cookie", ep.Server.AuthUsed())
	}
	if _, err := ep.Server.AllDBs(ctx, "", 0); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Filter("POST", "/_session")); n != 1 {
		t.Fatalf("%d logins before the secret changed, want 1", n)
	}
	// CouchDB 3.5 reads the secret from either section: change both.
	for _, sec := range []string{"chttpd_auth", "couch_httpd_auth"} {
		if err := srv.Client().PutJSON(ctx, "/_node/_local/_config/"+sec+"/secret", "another-secret", nil); err != nil {
			t.Fatal(err)
		}
	}
	// CouchDB applies a config change asynchronously: on a loaded
	// machine the old session may still be accepted for a moment. Ask
	// until the server refuses it once; every request must succeed.
	refused := 0
	deadline := time.Now().Add(30 * time.Second)
	for refused == 0 {
		if _, err := ep.Server.AllDBs(ctx, "", 0); err != nil {
			t.Fatalf("after the secret changed: %v", err)
		}
		for _, e := range p.Filter("GET", "/_all_dbs") {
			if e.Status == 401 {
				refused++
			}
		}
		if refused == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the server kept accepting the old session for 30 s after its secret changed")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if n := len(p.Filter("POST", "/_session")); n != 2 || refused != 1 {
		t.Fatalf("%d logins and %d refused requests, want 2 and 1", n, refused)
	}
	for _, e := range p.Exchanges() {
		if e.AuthScheme != "" {
			t.Errorf("%s %s carried an Authorization header", e.Method, e.Path)
		}
	}

	_, err = Probe(ctx, p.UserURL("admin", "wrong-"+pw), Options{Auth: AuthCookie})
	if err == nil || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), pw) {
		t.Fatalf("wrong password: %v", err)
	}
}
