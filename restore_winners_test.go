package sofa

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/sofadb/sofa/archive"
	"github.com/sofadb/sofa/replicate"
)

// winnersTarget answers Winners from a map (a component test of the
// winner log; the restore's end to end cases run on real servers).
type winnersTarget struct {
	replicate.Target
	winners map[string]string
}

func (w winnersTarget) Winners(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for _, id := range ids {
		if r, ok := w.winners[id]; ok {
			out[id] = r
		}
	}
	return out, nil
}

// leavesApart writes one database whose document "a" has its two leaves
// in records apart (document "b" between them), its losing leaf last,
// and returns the database read back.
func leavesApart(t *testing.T) *archive.DBReader {
	t.Helper()
	ctx := t.Context()
	var buf bytes.Buffer
	w, err := archive.NewWriter(&buf, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := w.Database("db")
	if err != nil {
		t.Fatal(err)
	}
	d.SetSourceInfo(replicate.DBInfo{Name: "db", DocCount: 3})
	leaf := func(id, gen, hash string, deleted bool) *replicate.Doc {
		rev := gen + "-" + hash
		body := fmt.Sprintf(`{"_id":%q,"_rev":%q}`, id, rev)
		if deleted {
			body = fmt.Sprintf(`{"_id":%q,"_rev":%q,"_deleted":true}`, id, rev)
		}
		return &replicate.Doc{ID: id, Rev: rev, Deleted: deleted, Body: []byte(body),
			Revisions: replicate.Revisions{Start: 1, IDs: []string{hash}}}
	}
	for _, docs := range [][]*replicate.Doc{
		{leaf("a", "1", "bbb", false)},
		{leaf("b", "1", "ccc", false)},
		{leaf("a", "1", "aaa", false), leaf("c", "1", "zzz", true), leaf("c", "1", "ddd", false)},
		{leaf("c", "1", "eee", true)},
	} {
		if _, err := d.WriteDocs(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := archive.NewReader(bytes.NewReader(buf.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	dbr, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	return dbr
}

// TestWinnerLog_LeavesApart: a document whose leaves lie apart in the
// archive is compared once, against its best leaf over all of them (the
// live 1-ddd of "c" beats its later deleted leaves, 1-bbb of "a" beats
// 1-aaa), and counted once: a rerun of a restore reports nothing as not
// rolled back, while a target whose winner is truly another still is.
func TestWinnerLog_LeavesApart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		winners map[string]string
		kept    int64
	}{
		{"restored", map[string]string{"a": "1-bbb", "b": "1-ccc", "c": "1-ddd"}, 0},
		{"a newer winner kept", map[string]string{"a": "2-new", "b": "1-ccc", "c": "1-ddd"}, 1},
		{"a loser winning", map[string]string{"a": "1-aaa", "b": "1-ccc", "c": "1-eee"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := newWinnerLog(leavesApart(t), true)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := l.Changes(t.Context(), nil, func(replicate.Change) error { return nil }); err != nil {
				t.Fatal(err)
			}
			kept, _, total, err := l.notWinning(t.Context(), winnersTarget{winners: tc.winners}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if kept != tc.kept || total != 3 {
				t.Errorf("kept %d of %d, want %d of 3", kept, total, tc.kept)
			}
		})
	}
}

// wins picks a winner among leaves of one generation as the target does:
// CouchDB compares a revision id of 32 hex digits as the bytes it
// spells (0xa7... beats "zzzz", whose first byte is 0x7a), PouchDB
// Server as strings.
func TestWins_RevisionIDOrder(t *testing.T) {
	hexRev := &replicate.Doc{Rev: "1-a7513998018780000000000000000000"}
	other := &replicate.Doc{Rev: "1-zzzz"}
	if !wins(hexRev, other, true) || wins(other, hexRev, true) {
		t.Error("CouchDB order: the hex revision should win")
	}
	if wins(hexRev, other, false) || !wins(other, hexRev, false) {
		t.Error("PouchDB order: zzzz should win")
	}
	lo, hi := &replicate.Doc{Rev: "2-0f000000000000000000000000000000"}, &replicate.Doc{Rev: "2-f0000000000000000000000000000000"}
	if !wins(hi, lo, true) || !wins(hi, lo, false) {
		t.Error("hex revisions order alike both ways")
	}
	if !wins(&replicate.Doc{Rev: "1-a"}, &replicate.Doc{Rev: "3-b", Deleted: true}, true) {
		t.Error("a live leaf beats a deleted one")
	}
}

// TestWinnerLog_LeavesNoFile: the winner log's temporary file is unlinked
// as soon as it is created, so a restore killed with it open leaves
// nothing behind in the temp dir.
func TestWinnerLog_LeavesNoFile(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	l, err := newWinnerLog(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Stat(l.f.Name()); !os.IsNotExist(err) {
		t.Errorf("%s is on disk while the log is open (%v): a killed restore leaves it", l.f.Name(), err)
	}
	if err := l.enc.Encode(noted{"a", "1-x", false, 0}); err != nil || l.w.Flush() != nil {
		t.Fatalf("the unlinked log takes no writes: %v", err)
	}
}
