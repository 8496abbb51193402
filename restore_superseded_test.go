package sofa_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sofadb/sofa"
	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/internal/couchtest"
	"github.com/sofadb/sofa/replicate"
)

// supersededArchive writes an archive of database "live" as a backup
// taken while documents changed writes it: "gone" stored live, then (other
// documents between) as the tombstone whose parent is that revision;
// "edited" at 1-ddd, then at 2-eee; "plain" once.
func supersededArchive(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "live.sofa")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := archive.NewWriter(f, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.Database("live")
	if err != nil {
		t.Fatal(err)
	}
	d.SetSourceInfo(replicate.DBInfo{Name: "live", DocCount: 2, DelCount: 1})
	rev := func(id string, deleted bool, hashes ...string) *replicate.Doc {
		r := fmt.Sprintf("%d-%s", len(hashes), hashes[0])
		hist, _ := json.Marshal(map[string]any{"start": len(hashes), "ids": hashes})
		body := fmt.Sprintf(`{"_id":%q,"_rev":%q,"v":%d,"_revisions":%s}`, id, r, len(hashes), hist)
		if deleted {
			body = fmt.Sprintf(`{"_id":%q,"_rev":%q,"_deleted":true,"_revisions":%s}`, id, r, hist)
		}
		return &replicate.Doc{ID: id, Rev: r, Deleted: deleted, Body: []byte(body),
			Revisions: replicate.Revisions{Start: len(hashes), IDs: hashes}}
	}
	for _, docs := range [][]*replicate.Doc{
		{rev("gone", false, "aaaa"), rev("edited", false, "dddd")},
		{rev("plain", false, "cccc")},
		{rev("gone", true, "bbbb", "aaaa"), rev("edited", false, "eeee", "dddd")},
	} {
		if _, err := d.WriteDocs(t.Context(), docs); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRestore_SupersededRecordsNotRolledBack: restoring again, into the
// database it made, an archive that holds documents at a revision and
// later at its successor (deleted or edited during the backup) reports
// nothing as not rolled back (each document's winner is that of the
// revision tree its records make, not the best record: a live revision
// beats a tombstone, yet here the tombstone is its child); a document
// truly changed on the target still is reported.
func TestRestore_SupersededRecordsNotRolledBack(t *testing.T) {
	ctx := t.Context()
	arch := openAt(t, supersededArchive(t), nil)
	dst := couchtest.Start(t)
	restore := func() []string {
		t.Helper()
		var ws []string
		for _, w := range restoreWarnings(t, []*sofa.Endpoint{arch}, dst, sofa.RestoreOptions{ReuseExisting: true, Engine: replicate.Options{NoCheckpoints: true}}) {
			if strings.Contains(w, "not rolled back") {
				ws = append(ws, w)
			}
		}
		return ws
	}
	if ws := restore(); len(ws) != 0 {
		t.Errorf("first restore: %q, want no not-rolled-back warning", ws)
	}
	if ws := restore(); len(ws) != 0 {
		t.Errorf("restore again into the database it made: %q, want no not-rolled-back warning", ws)
	}
	if _, err := dst.Client().PutDoc(ctx, "live", "plain", map[string]any{"_rev": "1-cccc", "v": 9}); err != nil {
		t.Fatal(err)
	}
	if ws := restore(); len(ws) != 1 || !strings.Contains(ws[0], "not rolled back: 1 of 3 documents") {
		t.Errorf("restore over a document edited on the target: %q, want one warning, 1 of 3", ws)
	}
}
