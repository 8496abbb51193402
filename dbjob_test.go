package sofa

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/couch"
	"github.com/sofadb/sofa/fleet"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// overcounted is a source server whose databases report two documents
// more than they hold: what a backup that missed documents looks like
// to its check.
type overcounted struct{ replicate.SourceServer }

func (s overcounted) OpenSource(ctx context.Context, name string, readOnly bool) (replicate.Source, error) {
	src, err := s.SourceServer.OpenSource(ctx, name, readOnly)
	return overcountedDB{src}, err
}

type overcountedDB struct{ replicate.Source }

func (d overcountedDB) Info(ctx context.Context) (replicate.DBInfo, error) {
	info, err := d.Source.Info(ctx)
	info.DocCount += 2
	return info, err
}

// shrunk is a source server whose databases count two documents more
// at their first GET /db than later: a source that lost documents to a
// purge while the copy ran.
type shrunk struct{ replicate.SourceServer }

func (s shrunk) OpenSource(ctx context.Context, name string, readOnly bool) (replicate.Source, error) {
	src, err := s.SourceServer.OpenSource(ctx, name, readOnly)
	return &shrunkDB{Source: src}, err
}

type shrunkDB struct {
	replicate.Source
	read bool
}

func (d *shrunkDB) Info(ctx context.Context) (replicate.DBInfo, error) {
	info, err := d.Source.Info(ctx)
	if !d.read {
		d.read = true
		info.DocCount += 2
	}
	return info, err
}

// TestBackupJob_StoredCountCheck: the backup job checks each group's leaf
// revisions against the source's doc counts, without a request: a group
// holding fewer is reported (a "verify" failure: partial) and marked
// incomplete in the archive; one holding them all is whole. On a
// mismatch the source's counts are read once more: a source that lost
// documents meanwhile (purged) and holds no more than were stored is
// whole.
func TestBackupJob_StoredCountCheck(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	c := srv.Client()
	for _, db := range []string{"short", "whole", "purged"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b", "c"} {
			if _, err := c.PutDoc(ctx, db, id, map[string]any{"db": db}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ep, err := couch.Probe(ctx, srv.URL, couch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := &BackupOptions{}
	j := o.job(ep.Server, w, listedTarget(map[string]bool{}))
	for _, db := range []string{"short", "whole", "purged"} {
		task := dbTask{Source: db, Target: db}
		switch db {
		case "short":
			task.From = overcounted{ep.Server}
		case "purged":
			task.From = shrunk{ep.Server}
		}
		before := ep.Server.Stats.Requests.Load()
		r, err := j.run(ctx, task, fleet.NoDBProgress)
		fleet.Decide(ctx, &r, err)
		switch {
		case db == "short" && (r.Status != fleet.StatusPartial || len(r.Failures) != 1 || r.Failures[0].Error != "verify" || !strings.Contains(r.Failures[0].Reason, "3 leaf revisions stored, fewer than the 5 documents")):
			t.Errorf("short: %s %+v, want partial with one verify failure (3 stored, 5 counted)", r.Status, r.Failures)
		case db != "short" && (r.Status != fleet.StatusOK || r.DocsWritten != 3):
			t.Errorf("%s: %s, %d written, failures %+v; want ok, 3", db, r.Status, r.DocsWritten, r.Failures)
		}
		// GET /db, _changes, _bulk_get, _security, _revs_limit: the check
		// adds none (and the source's info is read once), but for one
		// GET /db again on a mismatch.
		want := int64(5)
		if db != "whole" {
			want = 6
		}
		if n := ep.Server.Stats.Requests.Load() - before; n > want {
			t.Errorf("%s: %d requests to the source, want at most %d", db, n, want)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, dbs, err := archive.List(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dbs {
		if (d.Name == "short") != (d.Error != "") {
			t.Errorf("archive: %s: error %q", d.Name, d.Error)
		}
	}
}
