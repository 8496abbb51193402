package replicate_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
)

// TestReplayedFeed_ArchiveStoresOnce: an archive group is asked
// `_revs_diff` for every batch even when created for the run (its answer
// costs no request), so revisions the source's feed sends again (here a
// second pass over the feed from its start, as a CouchDB cluster replays
// a lost node's shard ranges) are neither read, written nor counted
// again, and the archive holds each once.
func TestReplayedFeed_ArchiveStoresOnce(t *testing.T) {
	ctx := context.Background()
	srv, src, _, sdb, _, srec, _ := sessionPair(t)
	c := srv.Client()
	for i := range 30 {
		if _, err := c.PutDoc(ctx, src, fmt.Sprintf("d%02d", i), map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	var sink bytes.Buffer
	w, err := archive.NewWriter(&sink, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.Database(src)
	if err != nil {
		t.Fatal(err)
	}
	opts := replicate.Options{BatchSize: 5, FetchBatch: 5, Workers: 1, NoCheckpoints: true, TargetCreated: &replicate.DBInfo{Name: src}}
	first, err := replicate.Run(ctx, sdb, d, opts)
	if err != nil || first.Stats.DocsWritten != 30 {
		t.Fatalf("first pass: %v, %+v", err, first)
	}
	before := len(srec.Exchanges())
	again, err := replicate.Run(ctx, sdb, d, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := again.Stats
	if s.MissingChecked != 30 || s.MissingFound != 0 || s.DocsRead != 0 || s.DocsWritten != 0 {
		t.Errorf("the replayed pass: missing_checked=%d missing_found=%d docs_read=%d docs_written=%d, want 30 0 0 0",
			s.MissingChecked, s.MissingFound, s.DocsRead, s.DocsWritten)
	}
	for _, k := range kinds(srec.Exchanges()[before:], src) {
		if k == "POST /_bulk_get" || k == "GET /{doc}" {
			t.Errorf("the replayed pass read revisions again: %s", k)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := archive.Verify(bytes.NewReader(sink.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := sum.Databases[0].Revisions; n != 30 {
		t.Errorf("the archive holds %d revisions, want 30", n)
	}
}
