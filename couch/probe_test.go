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
	"sync"
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
	var mu sync.Mutex
	var outside []string // requests outside the prefix that carried credentials
	rootStatus := http.StatusNotFound
	backendDown := false // the proxy answers 502 under the prefix
	px := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/couch")
		mu.Lock()
		down := backendDown
		mu.Unlock()
		if ok && down {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		if !ok {
			mu.Lock()
			if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" || r.URL.Path == "/_session" {
				outside = append(outside, r.Method+" "+r.URL.Path)
			}
			st := rootStatus
			mu.Unlock()
			http.Error(w, "another application", st)
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
	// The host's root belongs to another application, answering 404 or
	// asking for its own login (401): the server under the prefix is
	// found either way, and no credentials go to the root (the proxy
	// records any that do).
	for _, st := range []int{http.StatusNotFound, http.StatusUnauthorized} {
		mu.Lock()
		rootStatus = st
		mu.Unlock()
		for _, auth := range []AuthMode{AuthBasic, AuthCookie} {
			for _, u := range []string{base, base + "/"} {
				ep, err := Probe(t.Context(), u, Options{Auth: auth})
				if err != nil {
					t.Fatalf("root answering %d, %s auth: %s: %v", st, auth, RedactURL(u), err)
				}
				if ep.DBName != "" {
					t.Errorf("%s: taken as database %q", RedactURL(u), ep.DBName)
				}
				names, err := ep.Server.AllDBs(t.Context(), "", 100)
				if err != nil || !slices.Contains(names, "app") {
					t.Errorf("%s: databases %v (%v), want app among them", RedactURL(u), names, err)
				}
			}
		}
	}
	mu.Lock()
	if len(outside) > 0 {
		t.Errorf("credentials sent outside the prefix: %v", outside)
	}
	mu.Unlock()
	if up.User != nil {
		// a wrong password says so, naming the URL given (not "GET /:
		// 404" from the root)
		wrong := *pu
		wrong.User = url.UserPassword(up.User.Username(), "wrong-password")
		_, err := Probe(t.Context(), wrong.String(), Options{})
		if err == nil || !strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), "/couch") {
			t.Errorf("wrong password through the prefix: %v, want authentication failed naming /couch", err)
		}
	}
	ep, err := Probe(t.Context(), base+"/app", Options{})
	if err != nil || ep.DBName != "app" {
		t.Fatalf("a database under the prefix: %+v, %v", ep, err)
	}
	if _, err := ep.Server.DB("app").Info(t.Context()); err != nil {
		t.Errorf("info of app under the prefix: %v", err)
	}

	// The backend down (the proxy's 502 under the prefix): the error
	// names the URL given, and nothing goes to the root.
	mu.Lock()
	backendDown = true
	mu.Unlock()
	for _, auth := range []AuthMode{AuthBasic, AuthCookie} {
		for _, u := range []string{base, base + "/app"} {
			_, err := Probe(t.Context(), u, Options{Auth: auth, RetryTime: 100 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "/couch") {
				t.Errorf("backend down, %s auth, %s: %v, want the 502 naming the URL", auth, RedactURL(u), err)
			}
		}
	}
	mu.Lock()
	backendDown = false
	mu.Unlock()
	if up.User == nil || !couchtest.IsCouchDB() {
		return
	}
	// A server behind the prefix that requires a login
	// (require_valid_user): found with a cookie login at the prefix
	// (an anonymous look is refused), never by credentials at the root.
	admin := couchtest.NewClient(srv.URL)
	if err := admin.PutJSON(t.Context(), "/_node/_local/_config/chttpd/require_valid_user", "true", nil); err != nil {
		t.Fatal(err)
	}
	defer admin.PutJSON(context.Background(), "/_node/_local/_config/chttpd/require_valid_user", "false", nil)
	for _, auth := range []AuthMode{AuthBasic, AuthCookie} {
		for _, u := range []string{base, base + "/"} {
			ep, err := Probe(t.Context(), u, Options{Auth: auth})
			if err != nil || ep.DBName != "" {
				t.Errorf("require_valid_user, %s auth, %s: %+v, %v; want the server", auth, RedactURL(u), ep, err)
			}
		}
		ep, err := Probe(t.Context(), base+"/app", Options{Auth: auth})
		if err != nil || ep.DBName != "app" {
			t.Errorf("require_valid_user, %s auth: the database under the prefix: %+v, %v", auth, ep, err)
		}
	}
	mu.Lock()
	if len(outside) > 0 {
		t.Errorf("credentials sent outside the prefix: %v", outside)
	}
	mu.Unlock()
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
