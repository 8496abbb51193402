package sofa_test

import (
	"context"
	"errors"
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
