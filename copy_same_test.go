package sofa_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestCopy_SameSourceAndTarget: Copy, Sync and CopyDB refuse to copy a
// server or a database onto itself, with an *OptionError, before they
// read or write anything; two databases of one server are no such pair.
func TestCopy_SameSourceAndTarget(t *testing.T) {
	ctx := context.Background()
	srv := couchtest.Start(t)
	seed(t, srv, "a", 1)
	seed(t, srv, "b", 0)
	open := func(loc string) *sofa.Endpoint {
		ep, err := sofa.Open(ctx, loc, sofa.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		var oe *sofa.OptionError
		if !errors.As(err, &oe) || err.Error() != want {
			t.Errorf("%s: %v, want an *OptionError %q", what, err, want)
		}
	}
	s1, s2 := open(srv.URL), open(srv.URL)
	_, err := sofa.Copy(ctx, s1, s2, sofa.CopyOptions{})
	refused("Copy", err, "SOURCE and TARGET are the same server")
	_, err = sofa.Sync(ctx, s1, s2, sofa.SyncOptions{})
	refused("Sync", err, "SOURCE and TARGET are the same server")
	a1, a2 := open(srv.URL+"/a"), open(srv.URL+"/a")
	_, err = sofa.CopyDB(ctx, a1, a2, sofa.CopyDBOptions{})
	refused("CopyDB", err, "SOURCE and TARGET are the same database")
	if err := sofa.CheckDistinct(a1, open(srv.URL+"/b")); err != nil {
		t.Errorf("CheckDistinct of two databases of one server: %v", err)
	}
	if res, err := sofa.CopyDB(ctx, a1, open(srv.URL+"/b"), sofa.CopyDBOptions{}); err != nil || res.Stats.DocsWritten != 1 {
		t.Errorf("CopyDB a to b: %+v, %v", res, err)
	}
}

// TestCopy_SameUUIDWarned: a source and a target at different URLs that
// report one server uuid (nodes of one cluster; here one server under two
// host names) are warned of, since a copy between them copies each
// database onto itself: CopyDB lists the warning in its result, Copy
// logs it and lists it in its summary. A copy into another database of the same server is not.
func TestCopy_SameUUIDWarned(t *testing.T) {
	ctx := context.Background()
	srv := couchtest.Start(t)
	seed(t, srv, "a", 2)
	other := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if other == srv.URL {
		t.Skip("the test server's URL names no 127.0.0.1 to give another name")
	}
	open := func(loc string) *sofa.Endpoint {
		ep, err := sofa.Open(ctx, loc, sofa.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	src := open(srv.URL + "/a")
	if src.Couch().Server.UUID == "" {
		t.Skip("the server gives no uuid")
	}
	const want = "report the same server uuid"
	warned := func(ws []string) bool {
		return slices.ContainsFunc(ws, func(w string) bool { return strings.Contains(w, want) })
	}
	res, err := sofa.CopyDB(ctx, src, open(other+"/a"), sofa.CopyDBOptions{})
	if err != nil || !warned(res.Warnings) {
		t.Errorf("CopyDB a onto itself under another host name: %v, warnings %q, want %q", err, res.Warnings, want)
	}
	res, err = sofa.CopyDB(ctx, src, open(other+"/b"), sofa.CopyDBOptions{CreateTarget: true})
	if err != nil || warned(res.Warnings) || res.Stats.DocsWritten != 2 {
		t.Errorf("CopyDB a to b: %v, %d written, warnings %q", err, res.Stats.DocsWritten, res.Warnings)
	}
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	sum, _ := sofa.Copy(ctx, open(srv.URL), open(other), sofa.CopyOptions{Selection: sofa.Selection{Include: []string{"a"}}, RunControl: sofa.RunControl{Logf: logf}})
	mu.Lock()
	defer mu.Unlock()
	if !warned(lines) || sum == nil || !warned(sum.Warnings) {
		t.Errorf("Copy of a server onto itself under another host name logged %q, summary warnings %v, want %q", lines, sum, want)
	}
}
