package couch

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
)

// A server behind a proxy's path prefix (http://host/couch) is a server,
// not a database named "couch" (a new user's whole-server backup failed
// with "GET /: HTTP 404"); a database under the prefix is still one.
func TestProbe_ServerBehindPathPrefix(t *testing.T) {
	srv := couchtest.Start(t)
	if err := srv.Client().CreateDB(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	up, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(up)
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/couch")
		if !ok {
			http.NotFound(w, r)
			return
		}
		r.URL.Path = "/" + strings.TrimPrefix(rest, "/")
		r.URL.RawPath = ""
		rp.ServeHTTP(w, r)
	}))
	defer px.Close()
	pu, err := url.Parse(px.URL)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = up.User // the server's credentials, if it has any
	pu.Path = "/couch"
	base := pu.String()
	for _, u := range []string{base, base + "/"} {
		ep, err := Probe(t.Context(), u, Options{})
		if err != nil {
			t.Fatalf("%s: %v", RedactURL(u), err)
		}
		if ep.DBName != "" {
			t.Errorf("%s: taken as database %q", RedactURL(u), ep.DBName)
		}
		names, err := ep.Server.AllDBs(t.Context(), "", 100)
		if err != nil || !slices.Contains(names, "app") {
			t.Errorf("%s: databases %v (%v), want app among them", RedactURL(u), names, err)
		}
	}
	ep, err := Probe(t.Context(), base+"/app", Options{})
	if err != nil || ep.DBName != "app" {
		t.Fatalf("a database under the prefix: %+v, %v", ep, err)
	}
	if _, err := ep.Server.DB("app").Info(t.Context()); err != nil {
		t.Errorf("info of app under the prefix: %v", err)
	}
}
