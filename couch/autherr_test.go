package couch

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// TestAuthErr_Chain: a 401 keeps its one-line wording for an operator
// and its chain: StatusOf is 401 and errors.As finds the *Error, both
// for the server's refusal of a wrong password (Probe: the welcome) and
// for a database's (an anonymous read of a database with members). No
// message holds the password.
func TestAuthErr_Chain(t *testing.T) {
	couchtest.RequireKind(t, couchtest.CouchDB, "CouchDB answers a wrong password and an anonymous reader with 401")
	const pw = "autherr-s3cret"
	srv := couchtest.StartWith(t, couchtest.Options{AdminUser: "admin", AdminPassword: pw})
	ctx := t.Context()
	admin := couchtest.NewClient(srv.UserURL("admin", pw))
	if err := admin.CreateDB(ctx, "closed"); err != nil {
		t.Fatal(err)
	}
	if err := admin.MakeReadOnly(ctx, "closed", "someone"); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, wording string) {
		t.Helper()
		var ce *Error
		switch {
		case err == nil:
			t.Fatalf("%s: no error", what)
		case StatusOf(err) != 401 || !errors.As(err, &ce):
			t.Errorf("%s: StatusOf %d, *Error found %v: %v", what, StatusOf(err), ce != nil, err)
		case !strings.Contains(err.Error(), wording) || strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), "\n"):
			t.Errorf("%s: message %q, want one line saying %q without the password", what, err, wording)
		case strings.Count(err.Error(), "HTTP 401") != 1:
			t.Errorf("%s: message %q says HTTP 401 more than once", what, err)
		}
	}
	_, err := Probe(ctx, srv.UserURL("admin", "wrong-"+pw), Options{})
	check("wrong password", err, "authentication failed (HTTP 401): check the user name and password")

	// the database URL is asked first (probeSelf): its 401 is the
	// probe's error, naming the URL
	_, err = Probe(ctx, srv.UserURL("", "")+"/closed", Options{})
	check("anonymous probe", err, "authentication required (HTTP 401)")
	if err != nil && !strings.Contains(err.Error(), "/closed") {
		t.Errorf("anonymous probe: %q does not name the database URL", err)
	}
	ep, err := Probe(ctx, srv.UserURL("", ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ep.Server.DB("closed").Info(ctx)
	check("anonymous read", err, "authentication required (HTTP 401)")
}

// A URL naming a user and no password sends no credentials: an empty
// password would count as a failed login against the account.
func TestNoPassword_NoCredentialsSent(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization")+r.Header.Get("Cookie"))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"couchdb":"Welcome","version":"3.5.2","uuid":"u"}`)
	}))
	defer srv.Close()
	for _, auth := range []AuthMode{AuthBasic, AuthCookie} {
		got = nil
		u := strings.Replace(srv.URL, "http://", "http://someone@", 1)
		if _, err := Probe(t.Context(), u, Options{Auth: auth}); err != nil {
			t.Fatal(err)
		}
		for _, h := range got {
			if h != "" {
				t.Errorf("auth mode %v: a request carried credentials %q", auth, h)
			}
		}
		if len(got) == 0 {
			t.Errorf("auth mode %v: no request reached the server", auth)
		}
	}
}
