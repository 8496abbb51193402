package replicate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// goneSource is a source whose first read of document id's
// attachment finds the document deleted meanwhile and the attachment of
// the revision the feed listed gone with it (compacted away: CouchDB
// answers 404), as a copy of a live database may.
type goneSource struct {
	*couch.DB
	id     string
	once   sync.Once
	delete func() error
}

func (s *goneSource) Attachment(ctx context.Context, id, rev string, a *replicate.Attachment) error {
	if id != s.id {
		return s.DB.Attachment(ctx, id, rev, a)
	}
	var err error
	s.once.Do(func() { err = s.delete() })
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: attachment %q of %q rev %s: HTTP 404 not_found: missing", replicate.ErrUnreadable, a.Name, id, rev)
}

// TestRun_SupersededRevisionNotAFailure: a revision whose attachment
// cannot be read because the source replaced it since its feed listed it
// (the document deleted during the copy) is no failure: the run copies
// the newer leaf (the tombstone) instead, reports nothing not copied, and
// leaves the next run nothing to do. A revision still the source's leaf that cannot be read
// is reported as before.
func TestRun_SupersededRevisionNotAFailure(t *testing.T) {
	ctx := context.Background()
	srv, src, tgt, sdb, tdb, _, _ := sessionPair(t)
	c := srv.Client()
	for _, id := range []string{"keep", "victim", "stuck"} {
		if _, err := c.PutAttachment(ctx, src, id, "", "f.txt", "text/plain", []byte("bytes of "+id)); err != nil {
			t.Fatal(err)
		}
	}
	gs := &goneSource{DB: sdb, id: "victim"}
	gs.delete = func() error {
		var d struct {
			Rev string `json:"_rev"`
		}
		if err := c.GetJSON(ctx, "/"+couchtest.EscapeDB(src)+"/victim", &d); err != nil {
			return err
		}
		_, err := c.PutDoc(ctx, src, "victim", map[string]any{"_rev": d.Rev, "_deleted": true})
		return err
	}
	res, err := replicate.Run(ctx, gs, tdb, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 0 || res.Stats.DocWriteFailures != 0 {
		t.Errorf("failures %v (doc_write_failures %d), want none: the revision was replaced on the source", res.Failures, res.Stats.DocWriteFailures)
	}
	// The same run copied the newer leaf (the tombstone) instead: a
	// one-shot copy, or a backup, holds the deletion.
	couchtest.AssertEqual(t, srv.URL+"/"+couchtest.EscapeDB(src), srv.URL+"/"+couchtest.EscapeDB(tgt))
	if res, err = replicate.Run(ctx, sdb, tdb, replicate.Options{}); err != nil || len(res.Failures) != 0 || res.Stats.DocsWritten != 0 {
		t.Fatalf("second run: %v, %v, wrote %d (want nothing left)", err, res.Failures, res.Stats.DocsWritten)
	}

	// A leaf that cannot be read is still a failure.
	if _, err := c.PutAttachment(ctx, src, "stuck", coRev(t, c, src, "stuck"), "g.txt", "text/plain", []byte("again")); err != nil {
		t.Fatal(err)
	}
	gs2 := &goneSource{DB: sdb, id: "stuck", delete: func() error { return nil }}
	res, err = replicate.Run(ctx, gs2, tdb, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 1 || res.Failures[0].ID != "stuck" || res.Failures[0].Error != "read_failed" {
		t.Errorf("failures %v, want stuck read_failed", res.Failures)
	}
}

// coRev is document id's winning revision.
func coRev(t *testing.T, c *couchtest.Client, db, id string) string {
	t.Helper()
	var d struct {
		Rev string `json:"_rev"`
	}
	if err := c.GetJSON(context.Background(), "/"+couchtest.EscapeDB(db)+"/"+id, &d); err != nil {
		t.Fatal(err)
	}
	return d.Rev
}
