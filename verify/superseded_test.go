package verify_test

import (
	"bytes"
	"testing"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
	"github.com/sofadb/sofa/verify"
)

// TestCompare_ArchiveSupersededRevisions: a document changed while a
// backup ran is stored twice, at the revision read first and at its
// later one (whose history holds the first). The archive's leaves are
// those of the revision tree its records make, so the archive compares
// equal with the source as it ended: here "x" edited and "y" deleted
// between two runs into one database group, as a backup's later feed
// pages deliver them.
func TestCompare_ArchiveSupersededRevisions(t *testing.T) {
	srv := couchtest.Shared(t)
	name := srv.NewDB(t)
	c := srv.Client()
	if _, err := c.BulkDocs(t.Context(), name, false,
		raw(`{"_id":"x","_rev":"1-a","v":1}`),
		raw(`{"_id":"y","_rev":"1-a","v":1}`),
		raw(`{"_id":"z","_rev":"1-a","v":1}`),
	); err != nil {
		t.Fatal(err)
	}
	sdb := openDB(t, srv, name)
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dbw, err := w.Database(name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := sdb.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dbw.SetSourceInfo(info)
	_, err = replicate.Run(t.Context(), sdb, dbw, replicate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.BulkDocs(t.Context(), name, false,
		raw(`{"_id":"x","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"v":2}`),
		raw(`{"_id":"y","_rev":"2-d","_revisions":{"start":2,"ids":["d","a"]},"_deleted":true}`),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := replicate.Run(t.Context(), sdb, dbw, replicate.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := dbw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	records := 0
	if err := firstDB(t, buf.Bytes()).Changes(t.Context(), nil, func(ch replicate.Change) error {
		records += len(ch.Docs)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if records != 5 {
		t.Fatalf("the archive holds %d records, want 5 (x and y at both revisions)", records)
	}
	for _, mode := range []verify.Mode{verify.Cheap, verify.Full} {
		sp, err := verify.NewSpooled(firstDB(t, buf.Bytes()), "")
		if err != nil {
			t.Fatal(err)
		}
		r, err := verify.Compare(t.Context(), sp, sdb, verify.Options{Mode: mode})
		sp.Close()
		if err != nil {
			t.Fatal(err)
		}
		if r.Total != 0 {
			t.Errorf("%s: archive against its source: want equal, got %s", mode, dump(r))
		}
	}
}
