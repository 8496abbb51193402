package replicate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// TestInitialCopy_CreatedTargetIsNeverAskedRevsDiff: the initial copy of
// 40 revisions in batches of 2 (20 batches) into an empty target sends
// `_revs_diff` only as the every-16th-batch probe when the target existed
// before the run, and never when the caller says it created the target
// for this run (Options.TargetCreated): such a target holds only what the
// run wrote. Both copies are whole.
func TestInitialCopy_CreatedTargetIsNeverAskedRevsDiff(t *testing.T) {
	ctx := context.Background()
	for _, created := range []bool{false, true} {
		t.Run(fmt.Sprintf("created=%v", created), func(t *testing.T) {
			srv, src, tgt, sdb, tdb, _, trec := sessionPair(t)
			c := srv.Client()
			for i := range 40 {
				if _, err := c.PutDoc(ctx, src, fmt.Sprintf("d%02d", i), map[string]any{"i": i}); err != nil {
					t.Fatal(err)
				}
			}
			opts := replicate.Options{BatchSize: 2, FetchBatch: 2, WriteBatchDocs: 2, Workers: 1}
			if created {
				opts.TargetCreated = &replicate.DBInfo{Name: tgt}
			}
			res, err := replicate.Run(ctx, sdb, tdb, opts)
			if err != nil || res.Stats.DocsWritten != 40 {
				t.Fatalf("run: %v, %+v", err, res)
			}
			asked := 0
			for _, k := range kinds(trec.Exchanges(), tgt) {
				if k == "POST /_revs_diff" {
					asked++
				}
			}
			t.Logf("created=%v: %d _revs_diff over 20 batches", created, asked)
			if created && asked != 0 {
				t.Errorf("a target created for the run was asked _revs_diff %d times", asked)
			}
			if !created && asked == 0 {
				t.Errorf("an existing empty target was never asked _revs_diff over 20 batches (the every-16th probe)")
			}
			if info, err := tdb.Info(ctx); err != nil || info.DocCount != 40 {
				t.Errorf("target holds %+v (%v), want 40 documents", info, err)
			}
		})
	}
}
