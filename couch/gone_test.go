package couch

import (
	"errors"
	"strings"
	"testing"

	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// A database deleted while it is read fails as one: FetchRevs returns
// replicate.ErrNotFound, not one read_failed per revision (which made a
// copy of a database deleted part way report thousands of documents, each
// after its own fallback GET).
func TestFetchRevsDatabaseDeleted(t *testing.T) {
	srv := couchtest.Start(t)
	c := srv.Client()
	ctx := t.Context()
	const db = "gone-meanwhile"
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	var reqs []replicate.RevRequest
	for _, id := range []string{"a", "b", "c"} {
		rev, err := c.PutDoc(ctx, db, id, map[string]any{"v": id})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, replicate.RevRequest{ID: id, Rev: rev})
	}
	ep, err := Probe(ctx, srv.AdminURL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := ep.Server.DB(db)
	docs, errs, err := d.FetchRevs(ctx, reqs)
	if err != nil || len(docs) != 3 || len(errs) != 0 {
		t.Fatalf("before the delete: %d docs, %v, %v", len(docs), errs, err)
	}
	if err := c.DeleteDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	docs, errs, err = d.FetchRevs(ctx, reqs)
	if !errors.Is(err, replicate.ErrNotFound) || len(docs) != 0 || len(errs) != 0 {
		t.Fatalf("after the delete: %d docs, %d revision errors (%v), error %v; want replicate.ErrNotFound alone", len(docs), len(errs), errs, err)
	}
}

// A URL whose path has two segments names the database "b" under the
// prefix "/a"; when "/a" answers as no server, the error says how a
// database named "a/b" is written.
func TestProbeSlashHint(t *testing.T) {
	srv := couchtest.Start(t)
	ctx := t.Context()
	_, err := Probe(ctx, srv.AdminURL()+"/no-such-prefix/b", Options{RetryTime: -1})
	if err == nil || !strings.Contains(err.Error(), `"no-such-prefix/b" is written no-such-prefix%2Fb`) {
		t.Fatalf("Probe of a two-segment URL: %v, want the %%2F hint", err)
	}
	if _, err := Probe(ctx, srv.AdminURL()+"/b", Options{}); err != nil {
		t.Fatalf("Probe of a database URL: %v", err)
	}
}
