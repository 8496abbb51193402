package archive

import (
	"bytes"
	"testing"

	"github.com/sofadb/sofa/replicate"
)

// TestWriteDocs_ReplayStoredOnce: revisions a source sends again (a
// cluster's feed replaying the shard ranges of a lost node) are stored
// once per group and counted once; a new revision in the same batch is
// stored; another group may hold the same revision.
func TestWriteDocs_ReplayStoredOnce(t *testing.T) {
	var sink bytes.Buffer
	w, err := NewWriter(&sink, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := doc("a", "1-a", false, `{"_id":"a","_rev":"1-a"}`)
	b := doc("b", "2-b", false, `{"_id":"b","_rev":"2-b"}`, att("f", "text/plain", "", []byte("hello"), 5, 2))
	c := doc("c", "2-c", true, `{"_id":"c","_rev":"2-c","_deleted":true}`)
	d := doc("d", "1-d", false, `{"_id":"d","_rev":"1-d"}`)
	r, _ := w.Database("r")
	mustWrite(t, r, a, b, c)
	mustWrite(t, r, b, a, d, c) // replayed, but d
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	o, _ := w.Database("o")
	mustWrite(t, o, a)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, got := readArchive(t, sink.Bytes())
	equalDocs(t, "r", got["r"].docs, []*replicate.Doc{a, b, c, d})
	if s := got["r"].summary; s.Revisions != 4 || s.Tombstones != 1 || s.Attachments != 1 {
		t.Errorf("r counts %d revisions, %d tombstones, %d attachment references; want 4, 1, 1", s.Revisions, s.Tombstones, s.Attachments)
	}
	equalDocs(t, "o", got["o"].docs, []*replicate.Doc{a})
}

// TestWriteDocs_ReplayBudget: beyond the archive's budget of remembered
// revisions a replay is stored again (never dropped), and a group gives
// its keys back when it closes.
func TestWriteDocs_ReplayBudget(t *testing.T) {
	defer func(n int64) { maxReplayKeys = n }(maxReplayKeys)
	maxReplayKeys = 2
	var sink bytes.Buffer
	w, err := NewWriter(&sink, Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := doc("x", "1-x", false, `{"_id":"x","_rev":"1-x"}`)
	y := doc("y", "1-y", false, `{"_id":"y","_rev":"1-y"}`)
	z := doc("z", "1-z", false, `{"_id":"z","_rev":"1-z"}`)
	r, _ := w.Database("r")
	mustWrite(t, r, x, y, z)
	mustWrite(t, r, x, y, z)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := w.replayKeys.Load(); n != 2 {
		t.Errorf("%d keys left after the group closed, want the budget of 2 back", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, got := readArchive(t, sink.Bytes())
	equalDocs(t, "r", got["r"].docs, []*replicate.Doc{x, y, z, z})
}
