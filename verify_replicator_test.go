package sofa_test

import (
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/storage"
)

// A whole-server archive compared with the server a default restore
// filled: the archive's _replicator, which the restore left out, is not
// compared (named in LeftOut) and the rest is equal; WithReplicator, or an
// --include naming it, compares it and finds it missing.
func TestVerify_ArchiveLeavesOutReplicatorAsRestore(t *testing.T) {
	ctx := t.Context()
	srv := couchtest.Start(t)
	c := srv.Client()
	if err := c.CreateDB(ctx, "vrep-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "vrep-a", "d", map[string]any{"v": 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, "_replicator"); err != nil && couchtest.StatusOf(err) != 412 {
		t.Fatal(err)
	}
	if _, err := c.PutDoc(ctx, "_replicator", "vrep-job", map[string]any{"source": "http://127.0.0.1:9/nowhere", "target": "http://127.0.0.1:9/none", "continuous": false}); err != nil {
		t.Fatal(err)
	}
	src, err := sofa.Open(ctx, srv.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := sofa.Open(ctx, filepath.Join(t.TempDir(), "all.sofa"), sofa.OpenOptions{Store: storage.Local{}})
	if err != nil {
		t.Fatal(err)
	}
	sel := sofa.Selection{Include: []string{"vrep-*", "_replicator"}}
	if sum, err := sofa.Backup(ctx, src, ar, sofa.BackupOptions{Selection: sel}); err != nil || !sum.Complete() || sum.DBsTotal != 2 {
		t.Fatalf("backup: %+v, %v", sum, err)
	}
	tgt := couchtest.Start(t)
	dst, err := sofa.Open(ctx, tgt.URL, sofa.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := sofa.Restore(ctx, []*sofa.Endpoint{ar}, dst, sofa.RestoreOptions{}); err != nil || !sum.Complete() {
		t.Fatalf("restore: %+v, %v", sum, err)
	}
	res, err := sofa.Verify(ctx, ar, dst, sofa.VerifyOptions{})
	if err != nil || !res.Equal || res.DBsTotal != 1 {
		t.Fatalf("verify after a default restore: %v, %+v: want vrep-a equal, _replicator not compared", err, res)
	}
	if len(res.LeftOut) != 1 || res.LeftOut[0].Name != "_replicator" {
		t.Errorf("left out %+v, want _replicator", res.LeftOut)
	}
	for _, o := range []sofa.VerifyOptions{{WithReplicator: true}, {Selection: sofa.Selection{Include: []string{"_replicator"}}}} {
		res, err := sofa.Verify(ctx, ar, dst, o)
		if err != nil || res.Equal || res.DBsDiffer != 1 || len(res.LeftOut) != 0 {
			t.Errorf("verify with %+v: %v, %+v: want _replicator compared and different", o, err, res)
		}
	}
}
