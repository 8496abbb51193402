package couch

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

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

// A server that accepts the connection and never answers the welcome is
// given up on after the welcome's own attempt timeout, and said to be
// silent, not unreachable.
func TestProbe_SilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	old := welcomeAttemptTimeout
	welcomeAttemptTimeout = 200 * time.Millisecond
	defer func() { welcomeAttemptTimeout = old }()
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = Probe(ctx, "http://"+ln.Addr().String(), Options{AttemptTimeout: time.Hour, RetryTime: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no answer in time") || strings.Contains(err.Error(), "cannot connect") {
		t.Errorf("error %v, want one saying the server gave no answer in time", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("gave up after %v: the welcome's attempt timeout was not applied", d)
	}
}
