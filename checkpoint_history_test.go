package sofa_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/internal/couchtest"
)

// TestBackup_ChainCheckpointHistoryStaysShort: a chain of a full backup
// and five incrementals, one document changed before each: every
// archive's checkpoint (in its manifest and in the next one's header)
// keeps one history entry, so the incrementals do not grow (the history
// grew by one session of about 700 bytes per archive, up to 50, per
// database, twice per archive); each incremental still reads only the
// changed document, and the chain restores equal.
func TestBackup_ChainCheckpointHistoryStaysShort(t *testing.T) {
	ctx := t.Context()
	src := couchtest.Start(t)
	seed(t, src, "h", 20)
	server := openAt(t, src.URL, nil)
	dir := t.TempDir()
	var chain []*sofa.Endpoint
	histories := func(cps map[string]json.RawMessage) []int {
		var out []int
		for _, b := range cps {
			var cp struct{ History []json.RawMessage }
			if err := json.Unmarshal(b, &cp); err != nil {
				t.Fatal(err)
			}
			out = append(out, len(cp.History))
		}
		return out
	}
	for i := range 6 {
		if _, err := src.Client().PutDoc(ctx, "h", fmt.Sprintf("new%d", i), map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
		a := openAt(t, filepath.Join(dir, fmt.Sprintf("a%d.sofa", i)), nil)
		o := sofa.BackupOptions{Selection: sofa.Selection{Include: []string{"h"}}}
		if i > 0 {
			o.Since = chain[i-1].Archive()
		}
		sum, err := sofa.Backup(ctx, server, a, o)
		if err != nil || !sum.Complete() {
			t.Fatalf("backup %d: %+v, %v", i, sum, err)
		}
		if i > 0 && sum.DocsRead != 1 {
			t.Errorf("incremental %d read %d revisions, want the changed one", i, sum.DocsRead)
		}
		chain = append(chain, a)
		h, dbs := listArchive(t, a)
		if hs := histories(dbs["h"].Checkpoints); len(hs) != 1 || hs[0] != 1 {
			t.Errorf("archive %d: checkpoint history lengths %v, want [1]", i, hs)
		}
		if i > 0 {
			if hs := histories(h.Since.Databases["h"].Checkpoints); len(hs) != 1 || hs[0] != 1 {
				t.Errorf("archive %d: its header's since has checkpoint history lengths %v, want [1]", i, hs)
			}
		}
	}
	tgt := couchtest.StartKind(t, src.Kind)
	restoreInto(t, chain, tgt)
	couchtest.AssertEqual(t, src.DBURL("h"), tgt.DBURL("h"), couchtest.CompareOptions{})
}
